#!/bin/bash
# Data-parallel throughput on this machine: the same global batch (B=8, T=256 per step) trained by
# one process with 2 threads, and by `anneal launch --nproc-per-node 2` (2 ranks x 1 thread, each
# B=4) at ZeRO 0, 1 and 2, one after the other in this run. Prints the best step time and tokens/s of
# steps 2-8 and the ratio to the one-process run (the cost of communicating through the
# Communicator against sharing the cores with OpenMP threads).
# BENCH_SMOKE=1: the same four runs of L=2 H=2 C=32, T=16, B=2 (dp ranks B=1), 3 steps (figures mean
# nothing).
set -euo pipefail
# shellcheck source=bench/train_lib.sh
source "$(dirname "$0")/train_lib.sh"
L=4 H=4 C=256 T=256 B=8 S=8
[ "$SMOKE" = 0 ] || L=2 H=2 C=32 T=16 B=2 S=3
write_config <<YAML
model: {vocab_size: 50257, max_seq_len: $T, n_layer: $L, n_head: $H, n_embd: $C}
data: {dir: $DATA, seq_len: $T, batch_size: $B, seed: 1}
train: {steps: $S, log_every: 1, eval_every: 0, eval_batches: 1, peak_gflops: 100}
YAML
best() { grep -E "step +[2-8]/" | sed -n 's/.* | \([0-9]*\) ms | \([0-9]*\) tok\/s.*/\1 \2/p' | sort -n | head -1; }
printf "%-34s %10s %10s %8s\n" run "step ms" "tok/s" ratio
one=$(OMP_NUM_THREADS=2 "$ANNEAL" train --config "$cfg" --set train.threads=2 2>&1 | best)
printf "%-34s %10s %10s %8.2f\n" "1 process x 2 threads, B=$B" ${one% *} ${one#* } 1
for z in 0 1 2; do
  r=$(logged "$ANNEAL" launch --nproc-per-node 2 -- "$ANNEAL" train --config "$cfg" --set data.batch_size=$((B / 2)) --set dist.zero=$z 2>&1 | sed 's/^\[rank 0\] //' | best)
  ratio=$(echo "${r#* } / ${one#* }" | bc -l)
  printf "%-34s %10s %10s %8.2f\n" "dp=2 x 1 thread, B=$((B / 2)), ZeRO $z" ${r% *} ${r#* } "$ratio"
  echo "RESULT dp_scaling zero=$z one_process_tok_s=${one#* } dp2_tok_s=${r#* } ratio=$(printf %.2f "$ratio")" >&2
done
