#!/usr/bin/env bash
# anneal's cl100k_base, o200k_base and llama3 encodings against their oracles: every id must be equal.
#
#   tests/peers/encodings_vs_tiktoken.sh [ANNEAL_BINARY]     (default build/release/src/anneal)
#
# For each encoding E, against native tiktoken (tools/venv; tests/peers/tiktoken_native.py
# --encoding E: the npm rank files, and for llama3 Meta's construction — a tiktoken Encoding with
# Meta's pattern and special tokens over llama3-tokenizer-js's vocabulary):
#   E.kjv, E.kjv_2threads      data/kjv.txt as one text (anneal with 1 and 2 threads)
#   E.jargon_2threads          the Jargon File as one text
#   E.unicode_mix              tests/peers/fixtures/unicode_mix.txt
#   E.generated                100,000 pseudo-random strings (gen_strings.js: every kind of
#                              character, case changes inside words, contractions of any case)
#   E.all_codepoints           every Unicode scalar value in a context (--all-codepoints)
# and against a second, independent implementation:
#   cl100k_base / o200k_base: tiktoken's npm WASM build (tiktoken_oracle.js --encoding E) on
#     unicode_mix and generated;
#   llama3: npm llama3-tokenizer-js on kjv, jargon and unicode_mix (natural text only: its
#     JavaScript regex sees some Unicode whitespace differently from Meta's tiktoken pattern, so
#     on the generated strings it disagrees with native tiktoken, not only with anneal).
# Prints `case NAME: N texts, M tokens, K mismatches` per case, then `N passed, M failed`. Exits 1
# if any case failed, 2 if a prerequisite is missing.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
anneal=${1:-build/release/src/anneal}
case "$anneal" in
  /*) ;;
  *) anneal="$root/$anneal" ;;
esac
cd "$root"

js=(node "$here/tiktoken_oracle.js")
native=("$root/tools/venv/bin/python" "$here/tiktoken_native.py")
llama_js=(node "$here/llama3_js_oracle.mjs")
jargon_gz=/usr/share/doc/jargon-text/jargon.txt.gz
kjv=data/kjv.txt
mix=tests/peers/fixtures/unicode_mix.txt

missing=()
[[ -x "$anneal" ]] || missing+=("anneal binary $anneal (build it: cmake --build build/release)")
command -v node >/dev/null || missing+=("node (scripts/setup.sh)")
[[ -f tools/npm/node_modules/tiktoken/package.json ]] || missing+=("npm tiktoken (scripts/setup.sh)")
[[ -f tools/npm/node_modules/llama3-tokenizer-js/package.json ]] || missing+=("npm llama3-tokenizer-js (scripts/setup.sh)")
"${native[0]}" -c 'import tiktoken' 2>/dev/null || missing+=("native tiktoken in tools/venv (scripts/setup.sh)")
[[ -f "$kjv" ]] || missing+=("$kjv (scripts/setup.sh)")
[[ -f "$jargon_gz" ]] || missing+=("$jargon_gz (scripts/setup.sh installs jargon-text)")
if ((${#missing[@]})); then
  for m in "${missing[@]}"; do echo "missing: $m" >&2; done
  exit 2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/anneal-encodings.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
start_s=$SECONDS
gunzip -c "$jargon_gz" >"$tmp/jargon.txt"
"${js[@]}" --gen 100000 20240520 "$tmp/generated.jsonl"
"${js[@]}" --all-codepoints "$tmp/all_codepoints.jsonl"

passed=0
failed=0
# check NAME MODE INPUT ANNEAL_FLAGS ORACLE... : anneal tokenize against the oracle's ids.
check() {
  local name=$1 mode=$2 input=$3 aflags=$4
  shift 4
  local t0=$SECONDS mode_flag=() cflags=()
  [[ "$mode" == whole ]] && mode_flag=(--whole)
  [[ "$mode" == lines ]] && aflags="--json-lines $aflags"
  [[ "$name" == *all_codepoints* ]] && cflags=(--by-codepoint)
  if ! "$@" "${mode_flag[@]}" "$input" >"$tmp/expected" 2>"$tmp/oracle.err"; then
    echo "case $name: the oracle failed:"
    sed 's/^/  /' "$tmp/oracle.err" | head -20
    failed=$((failed + 1))
    return
  fi
  # shellcheck disable=SC2086
  if ! "$anneal" tokenize $aflags "$input" >"$tmp/actual" 2>"$tmp/anneal.err"; then
    echo "case $name: anneal tokenize $aflags failed:"
    sed 's/^/  /' "$tmp/anneal.err" | head -20
    failed=$((failed + 1))
    return
  fi
  if "${js[@]}" --compare "$name" "$mode" "$input" "$tmp/expected" "$tmp/actual" "${cflags[@]}"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
  fi
  echo "  ($((SECONDS - t0)) s)" >&2
}

for enc in cl100k_base o200k_base llama3; do
  t="--tokenizer $enc"
  check "$enc.kjv" whole "$kjv" "$t" "${native[@]}" --encoding "$enc"
  check "$enc.kjv_2threads" whole "$kjv" "$t --threads 2" "${native[@]}" --encoding "$enc"
  check "$enc.jargon_2threads" whole "$tmp/jargon.txt" "$t --threads 2" "${native[@]}" --encoding "$enc"
  check "$enc.unicode_mix" whole "$mix" "$t" "${native[@]}" --encoding "$enc"
  check "$enc.generated" lines "$tmp/generated.jsonl" "$t" "${native[@]}" --encoding "$enc"
  check "$enc.all_codepoints" lines "$tmp/all_codepoints.jsonl" "$t" "${native[@]}" --encoding "$enc"
  if [[ "$enc" == llama3 ]]; then
    check "$enc.kjv_llama3_js" whole "$kjv" "$t" "${llama_js[@]}"
    check "$enc.jargon_llama3_js" whole "$tmp/jargon.txt" "$t" "${llama_js[@]}"
    check "$enc.unicode_mix_llama3_js" whole "$mix" "$t" "${llama_js[@]}"
  else
    check "$enc.unicode_mix_wasm" whole "$mix" "$t" "${js[@]}" --encoding "$enc"
    check "$enc.generated_wasm" lines "$tmp/generated.jsonl" "$t" "${js[@]}" --encoding "$enc"
  fi
done

echo "($((SECONDS - start_s)) s in all)" >&2
echo "$passed passed, $failed failed"
((failed == 0))
