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
# --any-commit: a smoke run may be made from a tree with uncommitted changes.
python3 bench/check --results "$TMP/results" --require-all --any-commit >"$TMP/check.log" 2>&1
check "bench/check --require-all: every target found its figure, every RESULT has values" test $? -eq 0
cat "$TMP/check.log" | sed 's/^/  /'
# The checker must fail when a figure is missing or a benchmark failed.
cp -r "$TMP/results" "$TMP/broken"
sed -i 's/put_ratio=[0-9.]*/put_ratio=/' "$TMP/broken/s3_throughput.md"
expect_exit "bench/check catches a RESULT with no value" 1 "no value for put_ratio" \
  python3 bench/check --results "$TMP/broken" --require-all --any-commit
sed -i 's/^- exit status: 0/- exit status: 3/' "$TMP/broken/ckpt.md"
expect_exit "bench/check catches a benchmark that failed" 1 "ckpt: exit status 3" \
  python3 bench/check --results "$TMP/broken" --require-all --any-commit
rm "$TMP/broken/allreduce.md"
expect_exit "bench/check catches a target with no figure" 1 "allreduce: no RESULT for ratio" \
  python3 bench/check --results "$TMP/broken" --require-all --any-commit

# The committed results (bench/results): each names a commit of HEAD's history, made from a clean tree.
if [ "$(git rev-parse --is-shallow-repository 2>/dev/null)" = false ]; then
  python3 bench/check >"$TMP/committed.log" 2>&1
  check "bench/check: every committed results file names a commit of HEAD's history, from a clean tree" test $? -eq 0 ||
    grep -A20 "not tied" "$TMP/committed.log" | sed 's/^/  /'
  grep -E '^  [a-z_0-9]+: ' "$TMP/committed.log" | sed 's/^/  /'
  cp -r bench/results "$TMP/stale"
  sed -i 's/^- commit: .*/- commit: 0123456789ab/' "$TMP/stale/ckpt.md"
  sed -i 's/^- commit: \(.*\)/- commit: \1 with uncommitted changes/' "$TMP/stale/prep.md"
  python3 bench/check --results "$TMP/stale" >"$TMP/stale.log" 2>&1
  check "... and fails on a commit not in the repository and on an uncommitted tree" \
    bash -c '[ $1 -eq 1 ] && grep -q "ckpt: commit 0123456789ab is not in this repository" "$2" && grep -q "prep: made from a tree with uncommitted changes" "$2"' _ $? "$TMP/stale.log"
  # --gate: exit 1 on a figure that misses its target (a copy with one figure moved past it).
  sed -i 's/put_ratio=[0-9.]*/put_ratio=0.5/' "$TMP/stale/s3_throughput.md"
  expect_exit "bench/check --gate fails on a target not met" 1 "s3_throughput: put_ratio = 0.5, target >= 1.0" \
    python3 bench/check --results "$TMP/stale" --gate --any-commit
else
  skip_part "bench/check on the committed results: this checkout has no full git history"
fi
bash bench/train_ab.sh "$ANNEAL" "$ANNEAL" 1 1 >"$TMP/ab.log" 2>&1
check "bench/train_ab.sh, the same binary twice" grep -qE "^RESULT bench=train_ab threads=1 start_tok_s=[0-9.]+ end_tok_s=[0-9.]+ ratio=[0-9.]+" "$TMP/ab.log"
bash bench/compare_binaries.sh "$ANNEAL" "$ANNEAL" recompute >"$TMP/cmp.log" 2>&1
check "bench/compare_binaries.sh, the same binary twice" test "$(grep -c '^RESULT recompute mode=' "$TMP/cmp.log")" -eq 6
# bench/RESULTS.md's generated tables are what bench/results_tables makes of the committed results files
# now; and it catches a results file changed without regenerating (a copy with one figure moved).
check "bench/results_tables --check: RESULTS.md's tables are those of bench/results" python3 bench/results_tables --check
mkdir -p "$TMP/tables"
cp -r bench/results "$TMP/tables/results"
cp bench/RESULTS.md "$TMP/tables/RESULTS.md"
sed -i 's/put_ratio=[0-9.]*/put_ratio=0.123/' "$TMP/tables/results/s3_throughput.md"
expect_exit "bench/results_tables --check fails on a results file changed without regenerating" 1 "line [0-9]+ differs" \
  python3 bench/results_tables --check --results "$TMP/tables/results" --doc "$TMP/tables/RESULTS.md"
finish
