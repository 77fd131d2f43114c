#!/bin/bash
# Data-parallel throughput on this machine: the same global batch (B=8, T=256 per step) trained by
# one process with 2 threads, and by `anneal launch --nproc-per-node 2` (2 ranks x 1 thread, each
# B=4) at ZeRO 0, 1 and 2, one after the other in this run. Prints the best step time and tokens/s of
# steps 2-8 and the ratio to the one-process run (the cost of communicating through the
# Communicator against sharing the cores with OpenMP threads).
set -euo pipefail
source "$(dirname "$0")/train_lib.sh"
write_config <<YAML
model: {vocab_size: 50257, max_seq_len: 256, n_layer: 4, n_head: 4, n_embd: 256}
data: {dir: $DATA, seq_len: 256, batch_size: 8, seed: 1}
train: {steps: 8, log_every: 1, eval_every: 0, eval_batches: 1, peak_gflops: 100}
YAML
best() { grep -E "step +[2-8]/" | sed -n 's/.* | \([0-9]*\) ms | \([0-9]*\) tok\/s.*/\1 \2/p' | sort -n | head -1; }
printf "%-34s %10s %10s %8s\n" run "step ms" "tok/s" ratio
one=$(OMP_NUM_THREADS=2 "$ANNEAL" train --config "$cfg" --set train.threads=2 2>&1 | best)
printf "%-34s %10s %10s %8.2f\n" "1 process x 2 threads, B=8" ${one% *} ${one#* } 1
for z in 0 1 2; do
  r=$("$ANNEAL" launch --nproc-per-node 2 -- "$ANNEAL" train --config "$cfg" --set data.batch_size=4 --set dist.zero=$z 2>&1 | sed 's/^\[rank 0\] //' | best)
  ratio=$(echo "${r#* } / ${one#* }" | bc -l)
  printf "%-34s %10s %10s %8.2f\n" "dp=2 x 1 thread, B=4, ZeRO $z" ${r% *} ${r#* } "$ratio"
  echo "RESULT dp_scaling zero=$z one_process_tok_s=${one#* } dp2_tok_s=${r#* } ratio=$(printf %.2f "$ratio")" >&2
done
