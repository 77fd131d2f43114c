#!/usr/bin/env bash
# bench/prep: MB/s of `anneal prep` on the demo corpus (data/kjv, 4.3 MB, 66 documents) at 1 and 2
# workers, whole command wall time (vocabulary load, planning, tokenizing, writing shards, fsync,
# dataset.json), best of 3 runs into fresh folders. Side by side, in the same run: the tokenizer
# oracle tiktoken encoding the same text in memory (no I/O), and a plain copy of the corpus (the
# disk's own speed here) — the peers that bound what prep can do.
#   bench/prep.sh [ANNEAL]
set -euo pipefail
cd "$(dirname "$0")/.."
ANNEAL=$(readlink -f "${1:-build/release/src/anneal}")
TMP=$(mktemp -d /tmp/anneal_bench_prep.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
CORPUS=data/kjv
BYTES=$(cat "$CORPUS"/*.txt | wc -c)
MB=$(awk -v b="$BYTES" 'BEGIN{printf "%.3f", b/1e6}')

best() {  # best wall seconds of 3 runs of "$@" (run in a fresh output folder each time)
  local b=999999
  for i in 1 2 3; do
    rm -rf "$TMP/out"
    local t0=$EPOCHREALTIME
    "$@" >/dev/null 2>&1
    local t1=$EPOCHREALTIME
    b=$(awk -v a="$t0" -v c="$t1" -v b="$b" 'BEGIN{d=c-a; print (d<b)?d:b}')
  done
  echo "$b"
}
mbps() { awk -v mb="$MB" -v s="$1" 'BEGIN{printf "%.1f", mb/s}'; }

t1=$(best "$ANNEAL" prep --input "$CORPUS" --output "$TMP/out" --workers 1 --unit-mb 0.25 --val-fraction 0.05 --quiet)
t2=$(best "$ANNEAL" prep --input "$CORPUS" --output "$TMP/out" --workers 2 --unit-mb 0.25 --val-fraction 0.05 --quiet)
cat "$CORPUS"/*.txt >"$TMP/corpus.txt"
tk=$(node -e '
  const {get_encoding} = require("./tools/npm/node_modules/tiktoken");
  const enc = get_encoding("gpt2");
  const text = require("fs").readFileSync(process.argv[1], "utf8");
  let best = 1e9;
  for (let i = 0; i < 3; i++) { const t0 = process.hrtime.bigint(); enc.encode(text, [], []);
    best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9); }
  console.log(best);' "$TMP/corpus.txt")
cp_s=$(best cp -r "$CORPUS" "$TMP/out")

p1=$(mbps "$t1"); p2=$(mbps "$t2"); ptk=$(mbps "$tk"); pcp=$(mbps "$cp_s")
scale=$(awk -v a="$p2" -v b="$p1" 'BEGIN{printf "%.2f", a/b}')
vs_tk=$(awk -v a="$p1" -v b="$ptk" 'BEGIN{printf "%.2f", a/b}')
printf '%-44s %10s\n' "what (demo corpus, $MB MB)" "MB/s"
printf '%-44s %10s\n' "anneal prep, 1 worker (whole command)" "$p1"
printf '%-44s %10s\n' "anneal prep, 2 workers (whole command)" "$p2"
printf '%-44s %10s\n' "tiktoken encode only, 1 thread (peer)" "$ptk"
printf '%-44s %10s\n' "cp -r of the corpus (disk, peer)" "$pcp"
echo "RESULT bench=prep corpus_mb=$MB anneal_1w_mbps=$p1 anneal_2w_mbps=$p2 tiktoken_encode_mbps=$ptk cp_mbps=$pcp scaling_2w_over_1w=$scale ratio_prep_1w_vs_tiktoken=$vs_tk"
