#!/usr/bin/env bash
# bench/compare_binaries: the same benchmarks run with two anneal binaries back to back on this
# machine — a refactor's start and end commits, say — so their figures share the machine's state.
#   bench/compare_binaries.sh START_ANNEAL END_ANNEAL [BENCH...]
# BENCH names scripts in bench/ taking the binary as their first argument (default: the training
# benchmarks train_cpu_vs_torch dp_scaling tp_overhead pipeline_bubble). Prints each run's output
# under a "=== BENCH start|end" line; compare the RESULT lines of a pair.
# BENCH_SMOKE=1 (in the environment) reaches every benchmark: each runs in its smoke mode.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: bench/compare_binaries.sh START_ANNEAL END_ANNEAL [BENCH...]" >&2; exit 2; }
START=$(readlink -f "$1") END=$(readlink -f "$2")
shift 2
for b in "$START" "$END"; do [ -x "$b" ] || { echo "not an executable: $b (build it first)" >&2; exit 2; }; done
BENCHES=("$@")
[ ${#BENCHES[@]} -gt 0 ] || BENCHES=(train_cpu_vs_torch dp_scaling tp_overhead pipeline_bubble)
for bench in "${BENCHES[@]}"; do
  [ -f "bench/$bench.sh" ] || { echo "no benchmark bench/$bench.sh" >&2; exit 2; }
  for side in start end; do
    bin=$START; [ "$side" = end ] && bin=$END
    echo "=== $bench $side ($bin) $(date -u +%T)"
    bash "bench/$bench.sh" "$bin"
  done
done
