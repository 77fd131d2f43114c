#!/usr/bin/env bash
# Benchmark: GPT-2 tokenization throughput of anneal against tiktoken — native (its Rust core, the
# PyPI wheel in tools/venv: the strongest peer) and its npm WASM build — and gpt-tokenizer (npm, pure
# JS), on >= 10 MB of English text; then cl100k_base, o200k_base and llama3 on the same text, 1
# thread, beside native tiktoken and the npm peers (see "the other encodings" below).
#
#   bench/tokenize_vs_tiktoken.sh [ANNEAL_BINARY]     (default build/release/src/anneal)
#
# Corpus: data/kjv.txt, the Jargon File (jargon-text), fortunes (/usr/share/games/fortunes, from
# Debian's `fortunes` package, used when installed), then the plain-text documents under
# /usr/share/doc and /usr/share/common-licenses (capped at 3 MB) until 10 MB; if that is still
# short, the same sources are appended a second time (no text appears more than twice).
# Only valid UTF-8 files are used.
#
# Measured, best of 3 (MB = 10^6 bytes of the corpus):
#   anneal   wall time of the whole command `anneal tokenize --threads N --count FILE`
#            (process start, reading the file and the vocabulary included), N = 1 and 2;
#   tiktoken native  encode_ordinary(text) on 1 thread, and encode_ordinary_batch(pieces,
#            num_threads=2) on 2 threads over the corpus cut at line ends into 64 pieces
#            (tests/peers/tiktoken_native.py, the npm package's GPT-2 ranks): the encode call only;
#            the batch's token count is not compared (no pre-token crosses a cut, so it may differ
#            by a few);
#   tiktoken (npm WASM) get_encoding('gpt2').encode(text, [], []): the encode call only;
#   gpt-tokenizer  encode() of 'gpt-tokenizer/encoding/r50k_base' (GPT-2's ranks): the encode
#            call only, its merge cache cleared before each run (as in a fresh process); the
#            rate with the cache left warm from the previous run is reported as well.
# All of them must give the same token count (exit 1 otherwise).
# Prints a table and `RESULT key=value` lines.
# BENCH_SMOKE=1: the same, with the corpus cut to ~1 MB (at a line end) and 1 run instead of 3 (a
# check that the script still runs; the figures mean nothing).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
anneal=${1:-build/release/src/anneal}
case "$anneal" in
  /*) ;;
  *) anneal="$root/$anneal" ;;
esac
cd "$root"

npm_dir="$root/tools/npm/node_modules"
jargon_gz=/usr/share/doc/jargon-text/jargon.txt.gz
fortunes_dir=/usr/share/games/fortunes
target_bytes=$((10 * 1000 * 1000))
runs=3
smoke=${BENCH_SMOKE:-0}
if [[ $smoke == 1 ]]; then
  target_bytes=$((1000 * 1000))
  runs=1
fi

missing=()
[[ -x "$anneal" ]] || missing+=("anneal binary $anneal (build it: cmake --build build/release)")
command -v node >/dev/null || missing+=("node (apt-get install nodejs)")
native_py="$root/tools/venv/bin/python"
"$native_py" -c 'import tiktoken' 2>/dev/null || missing+=("native tiktoken in tools/venv (scripts/setup.sh)")
[[ -f "$npm_dir/tiktoken/package.json" ]] || missing+=("npm tiktoken under tools/npm (scripts/setup.sh)")
[[ -f "$npm_dir/gpt-tokenizer/package.json" ]] || missing+=("npm gpt-tokenizer under tools/npm (scripts/setup.sh)")
[[ -f data/kjv.txt ]] || missing+=("data/kjv.txt (scripts/setup.sh)")
if ((${#missing[@]})); then
  for m in "${missing[@]}"; do echo "missing: $m" >&2; done
  exit 2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/anneal-bench-tok.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
corpus="$tmp/corpus.txt"

# ---- the corpus ----------------------------------------------------------------------------
sources=() # files (already uncompressed, valid UTF-8), in order
add_source() { # FILE LABEL
  if iconv -f UTF-8 -t UTF-8 "$1" >/dev/null 2>&1; then
    sources+=("$1")
  else
    echo "skipping $2: not valid UTF-8" >&2
  fi
}
add_source data/kjv.txt kjv
if [[ -f "$jargon_gz" ]]; then
  gunzip -c "$jargon_gz" >"$tmp/jargon.txt"
  add_source "$tmp/jargon.txt" jargon
else
  echo "note: $jargon_gz missing (apt-get install jargon-text)" >&2
fi
fortunes_used=0
if [[ -d "$fortunes_dir" ]]; then
  : >"$tmp/fortunes.txt"
  while IFS= read -r f; do
    if iconv -f UTF-8 -t UTF-8 "$f" >/dev/null 2>&1; then cat "$f" >>"$tmp/fortunes.txt"; fi
  done < <(find "$fortunes_dir" -maxdepth 1 -type f ! -name '*.dat' | LC_ALL=C sort)
  if [[ -s "$tmp/fortunes.txt" ]]; then
    sources+=("$tmp/fortunes.txt")
    fortunes_used=1
  fi
else
  echo "note: $fortunes_dir missing (apt-get install fortunes); using other text instead" >&2
fi
size_of() {
  local total=0 f
  for f in "$@"; do total=$((total + $(stat -c %s "$f"))); done
  echo "$total"
}
have=$(size_of "${sources[@]}")
if ((have < target_bytes)); then
  # Plain-text documentation, capped so it does not dominate.
  : >"$tmp/docs.txt"
  cap=$((3 * 1000 * 1000))
  while IFS= read -r f; do
    (($(stat -c %s "$tmp/docs.txt") >= cap)) && break
    (($(stat -c %s "$tmp/docs.txt") + have >= target_bytes)) && break
    case "$f" in
      *.gz) gunzip -c "$f" >"$tmp/doc.one" 2>/dev/null || continue ;;
      *) cat "$f" >"$tmp/doc.one" ;;
    esac
    if iconv -f UTF-8 -t UTF-8 "$tmp/doc.one" >/dev/null 2>&1; then
      cat "$tmp/doc.one" >>"$tmp/docs.txt"
      printf '\n' >>"$tmp/docs.txt"
    fi
  done < <(find /usr/share/common-licenses /usr/share/doc -type f \
    \( -name '*.txt' -o -name '*.txt.gz' -o -name 'README*' -o -name 'NEWS*' -o -path '*/common-licenses/*' \) \
    ! -path '*/jargon-text/*' 2>/dev/null | LC_ALL=C sort)
  rm -f "$tmp/doc.one"
  [[ -s "$tmp/docs.txt" ]] && sources+=("$tmp/docs.txt")
fi
: >"$corpus"
copies=0
while (($(stat -c %s "$corpus") < target_bytes)) && ((copies < 2)); do
  for f in "${sources[@]}"; do
    cat "$f" >>"$corpus"
    (($(stat -c %s "$corpus") >= target_bytes)) && ((copies == 1)) && break
  done
  copies=$((copies + 1))
done
if [[ $smoke == 1 ]] && (($(stat -c %s "$corpus") > target_bytes)); then
  # The first target_bytes, then the rest of that line (so it ends at a '\n' and stays UTF-8).
  { head -c "$target_bytes" "$corpus"; tail -c +$((target_bytes + 1)) "$corpus" | sed -n 1p; } >"$tmp/cut.txt"
  mv "$tmp/cut.txt" "$corpus"
fi
corpus_bytes=$(stat -c %s "$corpus")
corpus_mb=$(awk -v b="$corpus_bytes" 'BEGIN { printf "%.2f", b / 1e6 }')
if ((corpus_bytes < target_bytes)); then
  echo "warning: corpus is only $corpus_mb MB (install fortunes, jargon-text for more text)" >&2
fi
echo "corpus: $corpus_mb MB from ${#sources[@]} sources (fortunes: $([[ $fortunes_used == 1 ]] && echo yes || echo no)), $copies pass(es)"

# ---- anneal --------------------------------------------------------------------------------
# anneal_best N FILE [TOKENIZE ARGS...]: the best wall time (s) of `anneal tokenize --threads N --count
# ARGS FILE` over $runs runs, in best_time, and its token count, in best_count.
anneal_best() {
  local n=$1 file=$2 i t0 t1 dt
  shift 2
  best_time=""
  for ((i = 0; i < runs; i++)); do
    t0=$EPOCHREALTIME
    best_count=$("$anneal" tokenize --threads "$n" --count "$@" "$file")
    t1=$EPOCHREALTIME
    dt=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }')
    if [[ -z "$best_time" ]] || awk -v x="$dt" -v y="$best_time" 'BEGIN { exit !(x < y) }'; then best_time=$dt; fi
  done
}
# Start-up (embedded vocabulary, process) on a one-line input, for the rate without it.
printf 'Hello world.\n' >"$tmp/tiny.txt"
anneal_best 1 "$tmp/tiny.txt"
startup_s=$(awk -v s="$best_time" 'BEGIN { printf "%.3f", s }')
anneal_best 1 "$corpus"
count_1=$best_count time_1=$best_time
anneal_best 2 "$corpus"
count_2=$best_count time_2=$best_time
# Encode call only (what the JavaScript peers' timings cover): anneal's own --stats, best of $runs.
encode_best() { # N [TOKENIZE ARGS...] -> best encode_mbps
  local n=$1 best=0 i v
  shift
  for ((i = 0; i < runs; i++)); do
    v=$("$anneal" tokenize --threads "$n" --count --stats "$@" "$corpus" 2>&1 >/dev/null |
        sed -nE 's/.*encode_mbps=([0-9.]+).*/\1/p')
    best=$(awk -v a="$v" -v b="$best" 'BEGIN { print (a > b) ? a : b }')
  done
  echo "$best"
}
enc_1=$(encode_best 1)
enc_2=$(encode_best 2)
# The machine's own two-core ceiling: two independent 1-thread processes, each on half the corpus
# (cut at a line end), run at once; aggregate = all bytes / the slower one's encode time.
half=$((corpus_bytes / 2))
head -c "$half" "$corpus" >"$tmp/h1.txt"
while [[ -n "$(tail -c 1 "$tmp/h1.txt")" ]]; do truncate -s -1 "$tmp/h1.txt"; done  # end at a '\n'
tail -c +$(($(wc -c <"$tmp/h1.txt") + 1)) "$corpus" >"$tmp/h2.txt"
pair_best=0
for ((i = 0; i < runs; i++)); do
  "$anneal" tokenize --count --stats "$tmp/h1.txt" 2>"$tmp/s1" >/dev/null &
  "$anneal" tokenize --count --stats "$tmp/h2.txt" 2>"$tmp/s2" >/dev/null
  wait
  v=$(cat "$tmp/s1" "$tmp/s2" | sed -nE 's/.*encode_s=([0-9.]+).*/\1/p' |
      awk -v b="$corpus_bytes" 'BEGIN { m = 0 } { if ($1 > m) m = $1 } END { printf "%.2f", b / 1e6 / m }')
  pair_best=$(awk -v a="$v" -v b="$pair_best" 'BEGIN { print (a > b) ? a : b }')
done

# ---- the JavaScript peers ------------------------------------------------------------------
cat >"$tmp/peers.js" <<'EOF'
'use strict';
const fs = require('fs');
const path = require('path');
const [which, file, npmDir, runs, encoding = 'gpt2'] = process.argv.slice(2);
const text = fs.readFileSync(file, 'utf8');
const now = () => Number(process.hrtime.bigint()) / 1e9;
let encode;
let before = () => {};
if (which === 'tiktoken') {
  const enc = require(path.join(npmDir, 'tiktoken')).get_encoding(encoding);
  encode = (t) => enc.encode(t, [], []).length;
} else if (which === 'llama3-tokenizer-js') {
  // An ES module: loaded by the caller's dynamic import (below).
  encode = (t) => global.llama3.encode(t, { bos: false, eos: false }).length;
} else {
  const file = encoding === 'gpt2' ? 'r50k_base.js' : encoding + '.js';
  const gt = require(path.join(npmDir, 'gpt-tokenizer', 'cjs', 'encoding', file));
  const opts = { disallowedSpecial: new Set() };
  encode = (t) => gt.encode(t, opts).length;
  before = (warm) => { if (!warm) gt.clearMergeCache(); };
}
const best = (warm) => {
  let b = Infinity, n = -1;
  for (let i = 0; i < Number(runs); i++) {
    before(warm);
    const t0 = now();
    n = encode(text);
    const dt = now() - t0;
    if (dt < b) b = dt;
  }
  return [b, n];
};
const main = () => {
  const [cold, n] = best(false);
  const out = { seconds: cold, tokens: n };
  if (which === 'gpt-tokenizer') out.warm_seconds = best(true)[0];
  console.log(JSON.stringify(out));
};
if (which === 'llama3-tokenizer-js') {
  const url = require('url').pathToFileURL(
      path.join(npmDir, 'llama3-tokenizer-js', 'bundle', 'llama3-tokenizer-with-baked-data.js')).href;
  import(url).then((m) => { global.llama3 = m.default; main(); });
} else {
  main();
}
EOF
tiktoken_json=$(node "$tmp/peers.js" tiktoken "$corpus" "$npm_dir" "$runs")
gptt_json=$(node "$tmp/peers.js" gpt-tokenizer "$corpus" "$npm_dir" "$runs")
field() { # JSON KEY
  node -e 'const o = JSON.parse(process.argv[1]); console.log(o[process.argv[2]]);' "$1" "$2"
}
tiktoken_s=$(field "$tiktoken_json" seconds)
tiktoken_n=$(field "$tiktoken_json" tokens)
gptt_s=$(field "$gptt_json" seconds)
gptt_warm_s=$(field "$gptt_json" warm_seconds)
gptt_n=$(field "$gptt_json" tokens)
native_json=$("$native_py" tests/peers/tiktoken_native.py --bench "$corpus" "$runs")
native2_json=$("$native_py" tests/peers/tiktoken_native.py --bench "$corpus" "$runs" 2)
native_s=$(field "$native_json" seconds)
native_n=$(field "$native_json" tokens)
native2_s=$(field "$native2_json" seconds)
native_version=$("$native_py" -c 'import tiktoken; print(tiktoken.__version__)')

# ---- report --------------------------------------------------------------------------------
mbps() { awk -v b="$corpus_bytes" -v s="$1" 'BEGIN { printf "%.2f", b / 1e6 / s }'; }
a1=$(mbps "$time_1")
a2=$(mbps "$time_2")
tk=$(mbps "$tiktoken_s")
gp=$(mbps "$gptt_s")
gpw=$(mbps "$gptt_warm_s")
nt=$(mbps "$native_s")
nt2=$(mbps "$native2_s")
# The fastest 1-thread peer of the three.
read -r fastest fastest_name < <(printf '%s tiktoken_native\n%s tiktoken\n%s gpt-tokenizer\n' "$nt" "$tk" "$gp" | sort -g -r | head -1)
r1=$(awk -v a="$a1" -v f="$fastest" 'BEGIN { printf "%.2f", a / f }')
r2=$(awk -v a="$a2" -v f="$fastest" 'BEGIN { printf "%.2f", a / f }')
net() { awk -v b="$corpus_bytes" -v s="$1" -v z="$startup_s" 'BEGIN { printf "%.2f", (s > z ? b / 1e6 / (s - z) : 0) }'; }
a1n=$(net "$time_1")
a2n=$(net "$time_2")

printf '\n%-34s %10s %10s %12s\n' "tokenizer (best of $runs)" "seconds" "MB/s" "tokens"
printf '%-34s %10.3f %10s %12s\n' "anneal, 1 thread (whole command)" "$time_1" "$a1" "$count_1"
printf '%-34s %10.3f %10s %12s\n' "anneal, 2 threads (whole command)" "$time_2" "$a2" "$count_2"
printf '%-34s %10.3f %10s %12s\n' "tiktoken $native_version native, 1 thread" "$native_s" "$nt" "$native_n"
printf '%-34s %10.3f %10s %12s\n' "tiktoken native, batch 2 threads" "$native2_s" "$nt2" "(64 pieces)"
printf '%-34s %10.3f %10s %12s\n' "tiktoken 1.0.22 WASM (encode call)" "$tiktoken_s" "$tk" "$tiktoken_n"
printf '%-34s %10.3f %10s %12s\n' "gpt-tokenizer 4.0.0 (encode call)" "$gptt_s" "$gp" "$gptt_n"
printf '%-34s %10.3f %10s %12s\n' "gpt-tokenizer, merge cache warm" "$gptt_warm_s" "$gpw" "$gptt_n"
printf 'anneal start-up (one-line input): %s s; without it: 1 thread %s MB/s, 2 threads %s MB/s\n' "$startup_s" "$a1n" "$a2n"
printf 'anneal 1 thread vs fastest peer (%s): %sx; 2 threads: %sx\n' "$fastest_name" "$r1" "$r2"
enc_r1=$(awk -v a="$enc_1" -v b="$fastest" 'BEGIN { printf "%.2f", a / b }')
enc_scale=$(awk -v a="$enc_2" -v b="$enc_1" 'BEGIN { printf "%.2f", a / b }')
pair_scale=$(awk -v a="$pair_best" -v b="$enc_1" 'BEGIN { printf "%.2f", a / b }')
printf 'anneal encode call only: 1 thread %s MB/s (%sx %s), 2 threads %s MB/s (%sx of 1 thread)\n' \
  "$enc_1" "$enc_r1" "$fastest_name" "$enc_2" "$enc_scale"
printf 'two-core ceiling (2 independent 1-thread processes, halves): %s MB/s (%sx of 1 thread)\n\n' \
  "$pair_best" "$pair_scale"

same=1
for n in "$count_2" "$tiktoken_n" "$gptt_n" "$native_n"; do [[ "$n" == "$count_1" ]] || same=0; done
echo "RESULT bench=tokenize corpus_mb=$corpus_mb tokens=$count_1 counts_match=$([[ $same == 1 ]] && echo true || echo false)"
echo "RESULT bench=tokenize anneal_1t_mbps=$a1 anneal_2t_mbps=$a2 tiktoken_mbps=$tk gpt_tokenizer_mbps=$gp gpt_tokenizer_warm_mbps=$gpw tiktoken_native_1t_mbps=$nt tiktoken_native_2t_batch_mbps=$nt2"
enc_r2n=$(awk -v a="$enc_2" -v b="$nt2" 'BEGIN { printf "%.2f", a / b }')
echo "RESULT bench=tokenize ratio_2t_vs_tiktoken_native_2t=$(awk -v a="$a2" -v b="$nt2" 'BEGIN { printf "%.2f", a / b }') encode_ratio_2t_vs_tiktoken_native_2t=$enc_r2n"
echo "RESULT bench=tokenize anneal_startup_s=$startup_s anneal_1t_mbps_excl_startup=$a1n anneal_2t_mbps_excl_startup=$a2n"
echo "RESULT bench=tokenize fastest_peer=$fastest_name ratio_1t_vs_fastest_peer=$r1 ratio_2t_vs_fastest_peer=$r2"
echo "RESULT bench=tokenize anneal_encode_1t_mbps=$enc_1 anneal_encode_2t_mbps=$enc_2 encode_scaling_2t=$enc_scale encode_ratio_1t_vs_fastest_peer=$enc_r1"
echo "RESULT bench=tokenize two_process_ceiling_mbps=$pair_best two_process_scaling=$pair_scale"
if ((same == 0)); then
  echo "token counts differ: anneal 1t $count_1, anneal 2t $count_2, tiktoken $tiktoken_n, gpt-tokenizer $gptt_n, tiktoken native $native_n" >&2
  exit 1
fi

# ---- the other encodings -------------------------------------------------------------------
# cl100k_base, o200k_base and llama3 on the same corpus, 1 thread: anneal's whole command and its
# encode call (--stats), native tiktoken's encode_ordinary (llama3: Meta's construction over
# llama3-tokenizer-js's ranks), and the npm peers' encode call — tiktoken WASM and gpt-tokenizer
# for the OpenAI encodings (gpt-tokenizer's merge cache cleared before each run), llama3-tokenizer-js
# for Llama 3. Token counts must agree (exit 1 otherwise).
printf '%-14s %12s %12s %12s %12s %12s %10s %10s\n' "encoding" "anneal cmd" "anneal enc" "tiktoken" \
  "tiktoken WASM" "npm JS" "vs native" "enc/native"
enc_fail=0
for e in cl100k_base o200k_base llama3; do
  anneal_best 1 "$corpus" --tokenizer "$e"
  n_a=$best_count best=$best_time
  e_enc=$(encode_best 1 --tokenizer "$e")
  nj=$("$native_py" tests/peers/tiktoken_native.py --encoding "$e" --bench "$corpus" "$runs")
  n_s=$(field "$nj" seconds)
  n_n=$(field "$nj" tokens)
  if [[ "$e" == llama3 ]]; then
    w_mb="-"
    w_n=$n_a
    jj=$(node "$tmp/peers.js" llama3-tokenizer-js "$corpus" "$npm_dir" "$runs" "$e")
  else
    wj=$(node "$tmp/peers.js" tiktoken "$corpus" "$npm_dir" "$runs" "$e")
    w_mb=$(mbps "$(field "$wj" seconds)")
    w_n=$(field "$wj" tokens)
    jj=$(node "$tmp/peers.js" gpt-tokenizer "$corpus" "$npm_dir" "$runs" "$e")
  fi
  j_mb=$(mbps "$(field "$jj" seconds)")
  j_n=$(field "$jj" tokens)
  a_mb=$(mbps "$best")
  n_mb=$(mbps "$n_s")
  r=$(awk -v a="$a_mb" -v b="$n_mb" 'BEGIN { printf "%.2f", a / b }')
  re=$(awk -v a="$e_enc" -v b="$n_mb" 'BEGIN { printf "%.2f", a / b }')
  printf '%-14s %12s %12s %12s %12s %12s %9sx %9sx\n' "$e" "$a_mb MB/s" "$e_enc MB/s" "$n_mb MB/s" "$w_mb" \
    "$j_mb MB/s" "$r" "$re"
  echo "RESULT bench=tokenize encoding=$e tokens=$n_a anneal_1t_mbps=$a_mb anneal_encode_1t_mbps=$e_enc tiktoken_native_1t_mbps=$n_mb tiktoken_wasm_mbps=$w_mb npm_js_mbps=$j_mb ratio_1t_vs_tiktoken_native=$r encode_ratio_1t_vs_tiktoken_native=$re"
  if [[ "$n_a" != "$n_n" || "$n_a" != "$w_n" || "$n_a" != "$j_n" ]]; then
    echo "$e: token counts differ: anneal $n_a, tiktoken native $n_n, tiktoken WASM $w_n, npm JS $j_n" >&2
    enc_fail=1
  fi
done
((enc_fail == 0)) || exit 1
