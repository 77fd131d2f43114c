#!/usr/bin/env bash
# e2e.bench_smoke: every benchmark of `make bench` run at tiny sizes (BENCH_SMOKE=1: the same code
# paths, one round; the figures mean nothing and nothing here asserts a timing), through make bench's
# own runner into a scratch results folder, so that a benchmark that stops running or stops printing
# a figure fails CI instead of rotting. Then bench/check --require-all: every results file exited 0,
# every RESULT key has a value, every target of bench/targets.tsv found its figure; and the checker
# itself catches a figure gone missing. The two A/B tools run with the same binary twice.
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.."
BUILD=$(dirname "$(dirname "$ANNEAL")")
check "a small dataset prepared for the training benchmarks" \
  "$ANNEAL" prep --input data/kjv --output "$TMP/kjv" --tokenizer gpt2 --val-fraction 0.05 --unit-mb 1 --workers 2 --quiet
export DATA=$TMP/kjv BENCH_SMOKE=1
t0=$(date +%s)
BENCH_RESULTS=$TMP/results bash bench/run_all.sh "$ANNEAL" >"$TMP/run_all.log" 2>&1
rc=$?
echo "make bench's runner, smoke sizes: exit $rc in $(( $(date +%s) - t0 )) s"
grep -E '^=== bench/' "$TMP/run_all.log" | sed 's/^/  /'
if [ $rc -eq 0 ]; then ok "every benchmark ran (bench/run_all.sh exit 0)"
else
  why=""
  for f in "$TMP"/results/*.md; do  # each failed benchmark's last lines, to see why in CI's log
    grep -q '^- exit status: [1-9]' "$f" || continue
    echo "  --- the end of $(basename "$f"):"; tail -25 "$f" | sed 's/^/  /'
    why+=" [$(basename "$f" .md): $(grep -v '^```' "$f" | grep -v '^\s*$' | tail -1 | cut -c1-160)]"
  done
  bad "bench/run_all.sh exit $rc: $(grep -E 'run_all: failed' "$TMP/run_all.log")$why"
fi
names=$(sed -n '/^ALL=(/,/)/p' bench/run_all.sh | tr -d '()' | sed 's/ALL=//' | tr -s ' \n' ' ')
# The commit: its hash in a git checkout, else said to be unknown (a CI runner's copy may have no .git).
if git rev-parse HEAD >/dev/null 2>&1; then commit_re='^- commit: [0-9a-f]{12}'; else commit_re='^- commit: unknown \(not a git checkout\)$'; fi
headed() { grep -qE "$commit_re" "$1" && grep -q "^- machine: [0-9]" "$1" && grep -q '^- command: `' "$1"; }
for n in $names; do
  check "bench/$n: results file names its commit, machine and command" headed "$TMP/results/$n.md"
  echo "     ($(sed -n 's/^- date: .*, \([0-9]*\) s$/\1/p' "$TMP/results/$n.md") s)"
done
python3 bench/check --results "$TMP/results" --require-all >"$TMP/check.log" 2>&1
check "bench/check --require-all: every target found its figure, every RESULT has values" test $? -eq 0
cat "$TMP/check.log" | sed 's/^/  /'
# The checker must fail when a figure is missing or a benchmark failed.
cp -r "$TMP/results" "$TMP/broken"
sed -i 's/put_ratio=[0-9.]*/put_ratio=/' "$TMP/broken/s3_throughput.md"
expect_exit "bench/check catches a RESULT with no value" 1 "no value for put_ratio" \
  python3 bench/check --results "$TMP/broken" --require-all
sed -i 's/^- exit status: 0/- exit status: 3/' "$TMP/broken/ckpt.md"
expect_exit "bench/check catches a benchmark that failed" 1 "ckpt: exit status 3" \
  python3 bench/check --results "$TMP/broken" --require-all
rm "$TMP/broken/allreduce.md"
expect_exit "bench/check catches a target with no figure" 1 "allreduce: no RESULT for ratio" \
  python3 bench/check --results "$TMP/broken" --require-all
bash bench/train_ab.sh "$ANNEAL" "$ANNEAL" 1 1 >"$TMP/ab.log" 2>&1
check "bench/train_ab.sh, the same binary twice" grep -qE "^RESULT bench=train_ab threads=1 start_tok_s=[0-9.]+ end_tok_s=[0-9.]+ ratio=[0-9.]+" "$TMP/ab.log"
bash bench/compare_binaries.sh "$ANNEAL" "$ANNEAL" recompute >"$TMP/cmp.log" 2>&1
check "bench/compare_binaries.sh, the same binary twice" test "$(grep -c '^RESULT recompute mode=' "$TMP/cmp.log")" -eq 6
finish
