#!/usr/bin/env bash
# make bench: every benchmark, one after another, each printing its table and RESULT lines.
# Copy the figures into bench/RESULTS.md with the date and command when they change.
set -euo pipefail
cd "$(dirname "$0")/.."
ANNEAL=${1:-build/release/src/anneal}
for b in tokenize_vs_tiktoken prep train_cpu_vs_torch zero_memory recompute dp_scaling parallel_memory pipeline_bubble tp_overhead ckpt job_latency api_load recovery warm_pool; do
  echo "=== bench/$b"
  bash "bench/$b.sh" "$ANNEAL"
done
echo "=== bench/allreduce"
bash bench/allreduce/run.sh "$(dirname "$(dirname "$ANNEAL")")"
echo "=== bench/s3_throughput"
bash bench/s3_throughput.sh "$(dirname "$(dirname "$ANNEAL")")"
