#!/usr/bin/env bash
# The command line's answers to everyday mistakes and questions (issue 39):
#   a mistyped command (did you mean), a --set typo blamed on --set, train --print-config, a resumed
#   run already at train.steps (nothing to do), prep into a folder of another plan's shards (orphans
#   named), anneal server's first lines (admin token, dashboard), no server but a local store (try
#   --local), jobs --status/--user/--name/--watch, logs --tail/--since, a channel path that does not
#   exist refused at submit.
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.."
export OMP_NUM_THREADS=1

# ---- a mistyped command ----
expect_exit "anneal sumbit: exit 2, did you mean 'submit'" 2 "'sumbit' is not an anneal command; did you mean 'submit'\?" \
  "$ANNEAL" sumbit x.yaml
expect_exit "anneal frobnicate: exit 2, no far-fetched suggestion" 2 "'frobnicate' is not an anneal command \(anneal --help" \
  "$ANNEAL" frobnicate

# ---- train: --set typos, --print-config, nothing to do ----
"$ANNEAL" prep --input data/kjv --output "$TMP/ds" --unit-mb 1 --val-fraction 0.05 --quiet >/dev/null
fixture_config "$TMP/ds" >"$TMP/c.yaml"
expect_exit "a --set typo is blamed on --set, with its did-you-mean" 2 \
  "^anneal: error: invalid input: --set optim.lrr=1: unknown key 'optim.lrr' \(did you mean 'optim.lr'\?\)$" \
  "$ANNEAL" train --config "$TMP/c.yaml" --set optim.lrr=1
check "... and not on the config file" bash -c "! grep -q 'c.yaml' '$TMP/err'"
echo "model: {n_layr: 2}" >>"$TMP/c_bad.yaml"
expect_exit "a typo in the file is the file's" 2 "c_bad.yaml: unknown key 'model.n_layr' \(did you mean 'model.n_layer'\?\)" \
  "$ANNEAL" train --config "$TMP/c_bad.yaml" --set data.dir="$TMP/ds"

"$ANNEAL" train --config "$TMP/c.yaml" --set optim.lr=0.02 --set train.checkpoint_dir="$TMP/ck" --print-config >"$TMP/printed.yaml"
check "--print-config exits 0" test $? -eq 0
check "... printing the override" grep -qx "  lr: 0.02" "$TMP/printed.yaml"
check "... the file's values" grep -qx "  n_embd: 8" "$TMP/printed.yaml"
check "... and the defaults" grep -qx "  beta2: 0.95" "$TMP/printed.yaml"
check "... without training (no checkpoint folder)" test ! -e "$TMP/ck"
"$ANNEAL" train --config "$TMP/printed.yaml" --print-config >"$TMP/printed2.yaml"
check "the printed config, read back, prints the same" diff <(tail -n +2 "$TMP/printed.yaml") <(tail -n +2 "$TMP/printed2.yaml")

"$ANNEAL" train --config "$TMP/c.yaml" --set train.checkpoint_dir="$TMP/ck" >"$TMP/train1.log" 2>&1
check "a 4-step run completes" grep -q "state hash" "$TMP/train1.log"
"$ANNEAL" train --config "$TMP/c.yaml" --set train.checkpoint_dir="$TMP/ck" >"$TMP/train2.log" 2>&1
check "run again at train.steps: exit 0" test $? -eq 0
check "... saying there is nothing to do and to raise train.steps" \
  grep -qE "^nothing to do: the newest checkpoint, .*/step-00000004, is at step 4 and train.steps is 4.*raise train.steps" "$TMP/train2.log"
check "... without training a step" bash -c "! grep -qE '^step ' '$TMP/train2.log'"
"$ANNEAL" train --config "$TMP/c.yaml" --set train.checkpoint_dir="$TMP/ck" --set train.steps=5 >"$TMP/train3.log" 2>&1
check "raising train.steps trains on from the checkpoint" grep -q "resumed from .*step-00000004 at step 4" "$TMP/train3.log"

# ---- prep into a folder holding another plan's shards ----
"$ANNEAL" prep --input data/kjv --output "$TMP/ds" --unit-mb 64 --val-fraction 0.05 --quiet >/dev/null 2>"$TMP/prep.err"
check "prep warns about the shards it did not write, naming them" \
  grep -qE "prep: warning: .*/ds holds [0-9]+ shard file\(s\) .*train_000001.bin" "$TMP/prep.err"
check "... and keeps them" test -f "$TMP/ds/train_000001.bin"
"$ANNEAL" prep --input data/kjv --output "$TMP/ds2" --unit-mb 64 --quiet >/dev/null 2>"$TMP/prep2.err"
check "a fresh folder: no warning" bash -c "! grep -q warning '$TMP/prep2.err'"

# ---- no server, a local store ----
expect_exit "no server, no local store: no --local hint" 3 "cannot reach the anneal server" \
  "$ANNEAL" jobs --server http://127.0.0.1:1
check "... (none given)" bash -c "! grep -q -- '--local' '$TMP/err'"

# ---- jobs and logs on a local store ----
mkdir -p "$TMP/src"
cat >"$TMP/echo.yaml" <<'YAML'
name: echo-a
entrypoint: {command: [bash, -c, "for i in $(seq 1 30); do echo line $i; done"]}
source: src
YAML
cat >"$TMP/fail.yaml" <<'YAML'
name: fail-b
entrypoint: {command: [bash, -c, "echo bad; exit 3"]}
source: src
YAML
"$ANNEAL" submit "$TMP/echo.yaml" --local --wait >/dev/null 2>&1
"$ANNEAL" submit "$TMP/fail.yaml" --local --wait >/dev/null 2>&1
ids() { awk 'NR > 1 && $1 ~ /-[0-9]+$/ { print $1 }' | tr '\n' ' '; }
check "jobs lists both" test "$("$ANNEAL" jobs --local | ids)" = "fail-b-0002 echo-a-0001 "
check "jobs --status failed (any case)" test "$("$ANNEAL" jobs --local --status failed | ids)" = "fail-b-0002 "
check "jobs --status Completed --name echo-a" test "$("$ANNEAL" jobs --local --status Completed --name echo-a | ids)" = "echo-a-0001 "
check "jobs --name fail-b --status completed: none" test -z "$("$ANNEAL" jobs --local --name fail-b --status completed | ids)"
check "jobs --user admin: both" test "$("$ANNEAL" jobs --local --user admin | ids)" = "fail-b-0002 echo-a-0001 "
check "jobs --user bob: none" test -z "$("$ANNEAL" jobs --local --user bob | ids)"
expect_exit "jobs --status nonsense: exit 2 naming the statuses" 2 "status: 'nonsense' is no job status; use one of InProgress" \
  "$ANNEAL" jobs --local --status nonsense
timeout --preserve-status -s INT 3 "$ANNEAL" jobs --local --watch >"$TMP/watch.out" 2>&1
check "jobs --watch ends with Ctrl-C, exit 0" test $? -eq 0
check "... having drawn the list every 2 s ($(grep -c '^every 2s' "$TMP/watch.out") times in 3 s)" \
  test "$(grep -c '^every 2s' "$TMP/watch.out")" -ge 2 -a "$(grep -c '^fail-b-0002 ' "$TMP/watch.out")" -ge 2

"$ANNEAL" logs echo-a-0001 --local --rank 0 --tail 3 >"$TMP/tail.out"
check "logs --tail 3: the last 3 lines" test "$(cat "$TMP/tail.out")" = "$(printf '[rank 0] line 28\n[rank 0] line 29\n[rank 0] line 30')"
check "logs --since 1h: every line" test "$("$ANNEAL" logs echo-a-0001 --local --rank 0 --since 1h | wc -l)" -eq 30
check "logs --since a time to come: none" test -z "$("$ANNEAL" logs echo-a-0001 --local --since 2099-01-01T00:00:00Z)"
check "logs --since an hour ago in ISO form: every line" test "$("$ANNEAL" logs echo-a-0001 --local --rank 0 \
  --since "$(date -u -d '1 hour ago' +%Y-%m-%dT%H:%M:%SZ)" | wc -l)" -eq 30
check "logs --tail 2 --since 1h" test "$("$ANNEAL" logs echo-a-0001 --local --rank 0 --tail 2 --since 1h | wc -l)" -eq 2
expect_exit "logs --since nonsense: exit 2 with the forms" 2 "since 'soon': give a duration before now \(90s, 10m" \
  "$ANNEAL" logs echo-a-0001 --local --since soon

# ---- a channel that does not exist ----
for uri in "$TMP/no_such_ds" "file://$TMP/no_such_ds"; do
  cat >"$TMP/chan.yaml" <<YAML
name: chan
entrypoint: {command: [true]}
source: src
channels: [{name: train, uri: "$uri"}]
YAML
  expect_exit "a channel $uri that does not exist: refused at submit naming channels[0].uri" 2 \
    "HTTP 400.*channels\[0\]\.uri: '$uri' does not exist on this server.*anneal prep --output" \
    "$ANNEAL" submit "$TMP/chan.yaml" --local
done
check "... and no job was made" test -z "$("$ANNEAL" jobs --local --name chan | ids)"

expect_exit "no server, a local store: try --local" 3 "cannot reach the anneal server.*local store in .*add --local" \
  "$ANNEAL" jobs --server http://127.0.0.1:1

# ---- anneal server's first lines ----
"$ANNEAL" server --data-dir "$TMP/srv" --listen 127.0.0.1:0 >"$TMP/srv.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 100); do grep -q "dashboard" "$TMP/srv.log" && break; sleep 0.1; done
kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null
check "server: names the admin token file" grep -qE "the admin token is in $TMP/srv/admin.token \(for the CLI: export ANNEAL_TOKEN_FILE=" "$TMP/srv.log"
check "... and the dashboard's URL" grep -qE "the dashboard is at http://127.0.0.1:[0-9]+/ui/" "$TMP/srv.log"
finish
