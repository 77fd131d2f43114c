#!/usr/bin/env bash
# anneal's GPT-2 tokenizer against OpenAI's tiktoken (npm, WASM): every id must be equal.
#
#   tests/peers/tokenizer_vs_tiktoken.sh [ANNEAL_BINARY]     (default build/release/src/anneal)
#
# Cases (zero mismatches allowed in each):
#   kjv, kjv_2threads          data/kjv.txt as one text (anneal with 1 and with 2 threads)
#   jargon, jargon_2threads    the Jargon File (jargon-text's jargon.txt.gz), as one text
#   unicode_mix                tests/peers/fixtures/unicode_mix.txt: scripts, RTL, emoji, marks...
#   generated                  100,000 pseudo-random strings (gen_strings.js), --json-lines
#   all_codepoints             every Unicode scalar value in a context (--all-codepoints)
#   all_codepoints_classes     the same texts with a probe vocabulary that shows, for every code
#                              point, which regex class (letter, number, whitespace, other) the
#                              pre-tokenizer put it in (see tiktoken_oracle.js)
# Prints `case NAME: N texts, M tokens, K mismatches` per case (and the first mismatch), then
# `N passed, M failed`. Exits 1 if any case failed, 2 if a prerequisite is missing.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
anneal=${1:-build/release/src/anneal}
# A relative binary path is taken from the repository root (where this script runs).
case "$anneal" in
  /*) ;;
  *) anneal="$root/$anneal" ;;
esac
cd "$root"

oracle=(node "$here/tiktoken_oracle.js")
jargon_gz=/usr/share/doc/jargon-text/jargon.txt.gz
kjv=data/kjv.txt
mix=tests/peers/fixtures/unicode_mix.txt
n_generated=100000
seed=20240520

missing=()
[[ -x "$anneal" ]] || missing+=("anneal binary $anneal (build it: cmake --build build/release)")
command -v node >/dev/null || missing+=("node (apt-get install nodejs)")
[[ -f tools/npm/node_modules/tiktoken/package.json ]] || missing+=("tiktoken (npm install under tools/npm: scripts/setup.sh)")
[[ -f "$kjv" ]] || missing+=("$kjv (scripts/setup.sh makes it from bible-kjv)")
[[ -f "$jargon_gz" ]] || missing+=("$jargon_gz (apt-get install jargon-text)")
[[ -f "$mix" ]] || missing+=("$mix")
if ((${#missing[@]})); then
  for m in "${missing[@]}"; do echo "missing: $m" >&2; done
  exit 2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/anneal-tok-vs-tiktoken.XXXXXX")
queue_pid=
cleanup() {
  if [[ -n "$queue_pid" ]]; then kill "$queue_pid" 2>/dev/null || true; wait "$queue_pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
start_s=$SECONDS

# The cases: NAME MODE INPUT ORACLE ANNEAL_FLAGS COMPARE_FLAGS
#   MODE whole: INPUT is one text; MODE lines: INPUT holds one JSON string a line.
#   ORACLE names tiktoken's output (cases with the same ORACLE share it).
cases=(
  "kjv|whole|$kjv|kjv||"
  "kjv_2threads|whole|$kjv|kjv|--threads 2|"
  "jargon|whole|$tmp/jargon.txt|jargon||"
  "jargon_2threads|whole|$tmp/jargon.txt|jargon|--threads 2|"
  "unicode_mix|whole|$mix|unicode_mix||"
  "generated|lines|$tmp/generated.jsonl|generated||"
  "all_codepoints|lines|$tmp/all_codepoints.jsonl|all_codepoints||--by-codepoint"
  "all_codepoints_classes|lines|$tmp/all_codepoints.jsonl|all_codepoints_classes|--tokenizer $tmp/probe_vocab|--by-codepoint --probe"
)
# tiktoken's runs: ORACLE MODE INPUT ORACLE_FLAGS. They run one after another in the background
# (tiktoken is the slow side) while anneal runs its cases and the comparisons in the foreground.
oracle_runs=(
  "kjv|whole|$kjv|"
  "jargon|whole|$tmp/jargon.txt|"
  "unicode_mix|whole|$mix|"
  "generated|lines|$tmp/generated.jsonl|"
  "all_codepoints|lines|$tmp/all_codepoints.jsonl|"
  "all_codepoints_classes|lines|$tmp/all_codepoints.jsonl|--probe"
)

gunzip -c "$jargon_gz" >"$tmp/jargon.txt"
"${oracle[@]}" --probe-vocab "$tmp/probe_vocab"

# Generated inputs are made while tiktoken starts on the corpora.
(
  set +e
  for run in "${oracle_runs[@]}"; do
    IFS='|' read -r name mode input oflags <<<"$run"
    while [[ "$mode" == lines && ! -e "$tmp/inputs.ready" ]]; do
      [[ -e "$tmp/inputs.failed" ]] && exit 1
      sleep 0.1
    done
    mode_flag=()
    [[ "$mode" == whole ]] && mode_flag=(--whole)
    # shellcheck disable=SC2086
    "${oracle[@]}" $oflags "${mode_flag[@]}" "$input" >"$tmp/tiktoken.$name" 2>"$tmp/tiktoken.$name.err"
    echo $? >"$tmp/tiktoken.$name.rc"
  done
) &
queue_pid=$!

if "${oracle[@]}" --gen "$n_generated" "$seed" "$tmp/generated.jsonl" &&
  "${oracle[@]}" --all-codepoints "$tmp/all_codepoints.jsonl"; then
  touch "$tmp/inputs.ready"
else
  touch "$tmp/inputs.failed"
  echo "generating the inputs failed" >&2
  exit 1
fi

passed=0
failed=0
for c in "${cases[@]}"; do
  IFS='|' read -r name mode input oracle_name aflags cflags <<<"$c"
  t0=$SECONDS
  [[ "$mode" == lines ]] && aflags="--json-lines $aflags"
  actual="$tmp/anneal.$name"
  anneal_rc=0
  # shellcheck disable=SC2086
  "$anneal" tokenize $aflags "$input" >"$actual" 2>"$tmp/anneal.err" || anneal_rc=$?
  while [[ ! -e "$tmp/tiktoken.$oracle_name.rc" ]]; do
    if ! kill -0 "$queue_pid" 2>/dev/null && [[ ! -e "$tmp/tiktoken.$oracle_name.rc" ]]; then
      echo 1 >"$tmp/tiktoken.$oracle_name.rc"
      echo "tiktoken's queue ended early" >"$tmp/tiktoken.$oracle_name.err"
    fi
    sleep 0.1
  done
  oracle_rc=$(cat "$tmp/tiktoken.$oracle_name.rc")
  if ((oracle_rc != 0)); then
    echo "case $name: tiktoken failed (exit $oracle_rc):"
    sed 's/^/  /' "$tmp/tiktoken.$oracle_name.err" | head -20
    failed=$((failed + 1))
  elif ((anneal_rc != 0)); then
    echo "case $name: anneal tokenize $aflags failed (exit $anneal_rc):"
    sed 's/^/  /' "$tmp/anneal.err" | head -20
    failed=$((failed + 1))
  else
    # shellcheck disable=SC2086
    if "${oracle[@]}" --compare "$name" "$mode" "$input" "$tmp/tiktoken.$oracle_name" "$actual" $cflags; then
      passed=$((passed + 1))
    else
      failed=$((failed + 1))
    fi
  fi
  rm -f "$actual"
  echo "  ($((SECONDS - t0)) s)" >&2
done
wait "$queue_pid" || true
queue_pid=

echo "($((SECONDS - start_s)) s in all)" >&2
echo "$passed passed, $failed failed"
((failed == 0))
