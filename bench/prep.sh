#!/usr/bin/env bash
# bench/prep: MB/s of `anneal prep` at 1 and 2 workers, whole command wall time (vocabulary load,
# planning, reading, tokenizing, writing and fsyncing shards, dataset.json), best of 3 runs into
# fresh folders, on two corpora:
#   demo   the demo corpus (data/kjv: 4.3 MB, 66 books, one plain-text document each)
#   jsonl  ~12 MB of JSON Lines made here from the KJV, the Jargon File and fortunes (paragraphs
#          and fortunes as documents: ~45,000 docs), cut into 1 MiB work units
# Side by side, in the same run: the tokenizer oracle tiktoken encoding the demo text in memory (no
# I/O), and a plain copy of the corpus (the disk's own speed here) — the peers that bound prep.
#   bench/prep.sh [ANNEAL]
# BENCH_SMOKE=1: the same, on the first 3 books of data/kjv (~0.5 MB) and the JSON Lines cut to ~1 MB,
# 1 run instead of 3 (a check that the script still runs; the figures mean nothing).
set -euo pipefail
cd "$(dirname "$0")/.."
ANNEAL=$(readlink -f "${1:-build/release/src/anneal}")
TMP=$(mktemp -d /tmp/anneal_bench_prep.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
CORPUS=data/kjv
RUNS=3
if [ "${BENCH_SMOKE:-0}" = 1 ]; then
  RUNS=1
  mkdir "$TMP/demo"
  books=("$CORPUS"/*.txt)
  cp "${books[@]:0:3}" "$TMP/demo"
  CORPUS=$TMP/demo
fi
BYTES=$(cat "$CORPUS"/*.txt | wc -c)
MB=$(awk -v b="$BYTES" 'BEGIN{printf "%.3f", b/1e6}')

best() {  # best wall seconds of $RUNS runs of "$@" (run in a fresh output folder each time)
  local b=999999
  for ((i = 0; i < RUNS; i++)); do
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
  for (let i = 0; i < Number(process.argv[2]); i++) { const t0 = process.hrtime.bigint(); enc.encode(text, [], []);
    best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9); }
  console.log(best);' "$TMP/corpus.txt" "$RUNS")
cp_s=$(best cp -r "$CORPUS" "$TMP/out")

p1=$(mbps "$t1"); p2=$(mbps "$t2"); ptk=$(mbps "$tk"); pcp=$(mbps "$cp_s")

# The JSON Lines corpus.
node -e '
  const fs = require("fs"), out = [];
  const add = (t, sep) => { for (const p of t.split(sep)) if (p.trim()) out.push(JSON.stringify({text: p})); };
  add(fs.readFileSync("data/kjv.txt", "utf8"), /\n\s*\n/);
  add(require("zlib").gunzipSync(fs.readFileSync("/usr/share/doc/jargon-text/jargon.txt.gz")).toString("utf8"), /\n\s*\n/);
  const fdir = "/usr/share/games/fortunes";
  if (fs.existsSync(fdir)) for (const f of fs.readdirSync(fdir).sort()) {
    const p = fdir + "/" + f;
    if (!fs.statSync(p).isFile() || f.endsWith(".dat") || f.endsWith(".u8")) continue;
    add(new TextDecoder("utf-8").decode(fs.readFileSync(p)), /\n%\n/);
  }
  fs.writeFileSync(process.argv[1], out.join("\n") + "\n");' "$TMP/corpus.jsonl"
if [ "${BENCH_SMOKE:-0}" = 1 ]; then  # the first 1 MB and the rest of that line
  { head -c 1000000 "$TMP/corpus.jsonl"; tail -c +1000001 "$TMP/corpus.jsonl" | sed -n 1p; } >"$TMP/cut.jsonl"
  mv "$TMP/cut.jsonl" "$TMP/corpus.jsonl"
fi
JBYTES=$(wc -c <"$TMP/corpus.jsonl")
JMB=$(awk -v b="$JBYTES" 'BEGIN{printf "%.3f", b/1e6}')
j1=$(best "$ANNEAL" prep --input "$TMP/corpus.jsonl" --output "$TMP/out" --workers 1 --unit-mb 1 --quiet)
j2=$(best "$ANNEAL" prep --input "$TMP/corpus.jsonl" --output "$TMP/out" --workers 2 --unit-mb 1 --quiet)
jp1=$(awk -v mb="$JMB" -v s="$j1" 'BEGIN{printf "%.1f", mb/s}')
jp2=$(awk -v mb="$JMB" -v s="$j2" 'BEGIN{printf "%.1f", mb/s}')
jscale=$(awk -v a="$jp2" -v b="$jp1" 'BEGIN{printf "%.2f", a/b}')
scale=$(awk -v a="$p2" -v b="$p1" 'BEGIN{printf "%.2f", a/b}')
vs_tk=$(awk -v a="$p1" -v b="$ptk" 'BEGIN{printf "%.2f", a/b}')
printf '%-44s %10s\n' "what (demo corpus, $MB MB)" "MB/s"
printf '%-44s %10s\n' "anneal prep, 1 worker (whole command)" "$p1"
printf '%-44s %10s\n' "anneal prep, 2 workers (whole command)" "$p2"
printf '%-44s %10s\n' "tiktoken encode only, 1 thread (peer)" "$ptk"
printf '%-44s %10s\n' "cp -r of the corpus (disk, peer)" "$pcp"
printf '%-44s %10s\n' "anneal prep, JSON Lines $JMB MB, 1 worker" "$jp1"
printf '%-44s %10s\n' "anneal prep, JSON Lines $JMB MB, 2 workers" "$jp2"
echo "RESULT bench=prep corpus_mb=$MB anneal_1w_mbps=$p1 anneal_2w_mbps=$p2 tiktoken_encode_mbps=$ptk cp_mbps=$pcp scaling_2w_over_1w=$scale ratio_prep_1w_vs_tiktoken=$vs_tk"
echo "RESULT bench=prep corpus=jsonl corpus_mb=$JMB anneal_1w_mbps=$jp1 anneal_2w_mbps=$jp2 scaling_2w_over_1w=$jscale"
