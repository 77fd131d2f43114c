#!/usr/bin/env bash
# Docs that say what the code does: every `anneal` command, subcommand and option, and every trainer
# config key, named in docs/**/*.md and README.md exists in the binary (tests/e2e/docs_names.py asks
# the binary: --help of every command, `anneal train --list-keys`). First proves on a synthetic doc
# that it catches an unknown command, subcommand, option and key, naming the file and line.
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.."
PY=/usr/bin/python3
CHECK=tests/e2e/docs_names.py

# The names it reads from the binary are there at all.
"$ANNEAL" train --list-keys >"$TMP/keys"
check "train --list-keys exits 0" test $? -eq 0
check "train --list-keys lists model.n_layer and dist.timeout_s, one per line" \
  grep -qE '^model\.n_layer( |$)' "$TMP/keys"
check "  ... and dist.timeout_s" grep -qE '^dist\.timeout_s( |$)' "$TMP/keys"

# Self-test: a doc with one of each unknown name, beside names that exist.
cat >"$TMP/bogus.md" <<'EOF'
# A doc

Run `anneal train --config c.yaml --set train.steps=5` and `anneal users add alice --role user`.
`anneal server --slurm-*` and train.checkpoint_* and model.safetensors are fine.

```
anneal frobnicate --now         # line 7: no such command
anneal users frob alice         # line 8: no such subcommand
```

Then `anneal submit job.yaml
--no-such-flag` (line 12) and the key `optim.learning_rate` (line 12),
and train.nope_* (line 13).
EOF
$PY "$CHECK" "$ANNEAL" "$TMP/bogus.md" >"$TMP/bogus.out" 2>&1
rc=$?
check "a doc with unknown names fails (exit 1)" test "$rc" -eq 1 || cat "$TMP/bogus.out"
for want in "bogus.md:7: unknown command 'anneal frobnicate'" \
            "bogus.md:8: unknown subcommand 'anneal users frob'" \
            "bogus.md:12: unknown option '--no-such-flag' of 'anneal submit'" \
            "bogus.md:12: unknown config key 'optim.learning_rate'" \
            "bogus.md:13: unknown config key 'train.nope_\*'"; do
  check "self-test names: $want" grep -q "$want" "$TMP/bogus.out" || cat "$TMP/bogus.out"
done
check "self-test: nothing else is reported (5 unknown names)" grep -q "; 5 unknown name(s)" "$TMP/bogus.out" ||
  cat "$TMP/bogus.out"

# The docs themselves.
mapfile -t docs < <(ls docs/*.md docs/*/*.md README.md)
check "there are docs to read (${#docs[@]})" test "${#docs[@]}" -gt 10
$PY "$CHECK" "$ANNEAL" "${docs[@]}" >"$TMP/docs.out" 2>&1
rc=$?
cat "$TMP/docs.out"
check "every command, subcommand, option and config key the docs name exists" test "$rc" -eq 0
finish
