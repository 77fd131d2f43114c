#!/usr/bin/env bash
# anneal's GPT-2 tokenizer against OpenAI's tiktoken — its npm WASM build and its native (Rust) build
# from PyPI (tests/peers/tiktoken_native.py, the npm package's ranks): every id must be equal.
#
#   tests/peers/tokenizer_vs_tiktoken.sh [ANNEAL_BINARY]     (default build/release/src/anneal)
#
# Cases (zero mismatches allowed in each):
#   kjv, kjv_2threads          data/kjv.txt as one text (anneal with 1 and with 2 threads)
#   jargon, jargon_2threads    the Jargon File (jargon-text's jargon.txt.gz), as one text
#   unicode_mix                tests/peers/fixtures/unicode_mix.txt: scripts, RTL, emoji, marks...
#   generated, generated_2threads
#                              100,000 pseudo-random strings (gen_strings.js), --json-lines
#   all_codepoints             every Unicode scalar value in a context (--all-codepoints)
#   kjv_native, jargon_native, unicode_mix_native, generated_native
#                              the same inputs against native tiktoken (tools/venv)
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
native=("$root/tools/venv/bin/python" "$here/tiktoken_native.py")  # oracle runs named native_*
jargon_gz=/usr/share/doc/jargon-text/jargon.txt.gz
kjv=data/kjv.txt
mix=tests/peers/fixtures/unicode_mix.txt
n_generated=100000
seed=20240520

missing=()
[[ -x "$anneal" ]] || missing+=("anneal binary $anneal (build it: cmake --build build/release)")
command -v node >/dev/null || missing+=("node (apt-get install nodejs)")
[[ -f tools/npm/node_modules/tiktoken/package.json ]] || missing+=("tiktoken (npm install under tools/npm: scripts/setup.sh)")
"${native[0]}" -c 'import tiktoken' 2>/dev/null || missing+=("native tiktoken in tools/venv (scripts/setup.sh)")
[[ -f "$kjv" ]] || missing+=("$kjv (scripts/setup.sh makes it from bible-kjv)")
[[ -f "$jargon_gz" ]] || missing+=("$jargon_gz (apt-get install jargon-text)")
[[ -f "$mix" ]] || missing+=("$mix")
if ((${#missing[@]})); then
  for m in "${missing[@]}"; do echo "missing: $m" >&2; done
  exit 2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/anneal-tok-vs-tiktoken.XXXXXX")
queue_pids=()
cleanup() {
  local p
  for p in "${queue_pids[@]}"; do
    # the queue's current tiktoken run first, then the queue itself
    pkill -P "$p" 2>/dev/null || true
    kill "$p" 2>/dev/null || true
  done
  wait 2>/dev/null || true
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
  "generated_2threads|lines|$tmp/generated.jsonl|generated|--threads 2|"
  "all_codepoints|lines|$tmp/all_codepoints.jsonl|all_codepoints||--by-codepoint"
  "all_codepoints_classes|lines|$tmp/all_codepoints.jsonl|all_codepoints_classes|--tokenizer $tmp/probe_vocab|--by-codepoint --probe"
  "kjv_native|whole|$kjv|native_kjv||"
  "jargon_native|whole|$tmp/jargon.txt|native_jargon||"
  "unicode_mix_native|whole|$mix|native_unicode_mix||"
  "generated_native|lines|$tmp/generated.jsonl|native_generated||"
)
# tiktoken's runs: QUEUE ORACLE MODE INPUT ORACLE_FLAGS. tiktoken is the slow side: its runs go
# in two background queues (each runs its list in order) while anneal runs the cases and the
# comparisons in the foreground.
oracle_runs=(
  "1|kjv|whole|$kjv|"
  "1|jargon|whole|$tmp/jargon.txt|"
  "1|unicode_mix|whole|$mix|"
  "1|generated|lines|$tmp/generated.jsonl|"
  "1|all_codepoints|lines|$tmp/all_codepoints.jsonl|"
  "2|all_codepoints_classes|lines|$tmp/all_codepoints.jsonl|--probe"
  "2|native_kjv|whole|$kjv|"
  "2|native_jargon|whole|$tmp/jargon.txt|"
  "2|native_unicode_mix|whole|$mix|"
  "2|native_generated|lines|$tmp/generated.jsonl|"
)

gunzip -c "$jargon_gz" >"$tmp/jargon.txt"
"${oracle[@]}" --probe-vocab "$tmp/probe_vocab"

run_queue() {
  local q=$1 run qid name mode input oflags
  set +e
  for run in "${oracle_runs[@]}"; do
    IFS='|' read -r qid name mode input oflags <<<"$run"
    [[ "$qid" == "$q" ]] || continue
    # Generated inputs are made while tiktoken starts on the corpora.
    while [[ "$mode" == lines && ! -e "$tmp/inputs.ready" ]]; do
      [[ -e "$tmp/inputs.failed" ]] && return 1
      sleep 0.1
    done
    local mode_flag=()
    [[ "$mode" == whole ]] && mode_flag=(--whole)
    local cmd=("${oracle[@]}")
    [[ "$name" == native_* ]] && cmd=("${native[@]}")
    # shellcheck disable=SC2086
    "${cmd[@]}" $oflags "${mode_flag[@]}" "$input" >"$tmp/tiktoken.$name" 2>"$tmp/tiktoken.$name.err"
    echo $? >"$tmp/tiktoken.$name.rc"
  done
}
run_queue 1 &
queue_pids=($!)
run_queue 2 &
queue_pids+=($!)

"${oracle[@]}" --gen "$n_generated" "$seed" "$tmp/generated.jsonl" &
gen_pid=$!
gen_ok=1
"${oracle[@]}" --all-codepoints "$tmp/all_codepoints.jsonl" || gen_ok=0
wait "$gen_pid" || gen_ok=0
if ((gen_ok)); then
  touch "$tmp/inputs.ready"
else
  touch "$tmp/inputs.failed"
  echo "generating the inputs failed" >&2
  exit 1
fi

queues_alive() {
  local p
  for p in "${queue_pids[@]}"; do kill -0 "$p" 2>/dev/null && return 0; done
  return 1
}

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
    if ! queues_alive && [[ ! -e "$tmp/tiktoken.$oracle_name.rc" ]]; then
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
wait "${queue_pids[@]}" || true
queue_pids=()

echo "($((SECONDS - start_s)) s in all)" >&2
echo "$passed passed, $failed failed"
((failed == 0))
