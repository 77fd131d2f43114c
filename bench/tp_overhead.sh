#!/bin/bash
# Tensor parallelism's cost on this machine: the same global batch (B=8, T=128) trained at tp=1 (one
# process, 2 threads, and one process, 1 thread) and at tp=2 (2 ranks x 1 thread, each holding half
# of every layer's heads and MLP and half of the vocabulary), one after the other in this run. Prints
# the best step time of steps 2-6, the ratio to tp=1, and the bytes each tp rank sent per step in its
# group's collectives (measured, beside the count from the model's shape: per layer two allreduces
# of (B,T,C) in forward and two in backward, one each for the embedding and the LM head's input
# gradient, and the loss's all-gather of 2 doubles per position, at 2(t-1)/t and (t-1) of the
# buffer as a ring moves them).
# BENCH_SMOKE=1: the same three runs of B=2, T=16, C=32, L=2, H=2, 3 steps (figures mean nothing).
set -euo pipefail
# shellcheck source=bench/train_lib.sh
source "$(dirname "$0")/train_lib.sh"
B=8 T=128 C=256 L=4 H=4 S=6
[ "$SMOKE" = 0 ] || B=2 T=16 C=32 L=2 H=2 S=3
write_config <<YAML
model: {vocab_size: 50257, max_seq_len: $T, n_layer: $L, n_head: $H, n_embd: $C}
data: {dir: $DATA, seq_len: $T, batch_size: $B, seed: 1}
train: {steps: $S, log_every: 1, eval_every: 0, eval_batches: 1, peak_gflops: 100}
YAML
best() { grep -E "step +[2-6]/" | sed -n 's/.* | \([0-9]*\) ms | .*/\1/p' | sort -n | head -1; }
printf "%-40s %10s %10s %14s\n" run "step ms" "vs tp=1" "MB sent/step"
one2=$(OMP_NUM_THREADS=2 "$ANNEAL" train --config "$cfg" --set train.threads=2 2>&1 | best)
printf "%-40s %10s %10.2f %14s\n" "tp=1: 1 process x 2 threads" "$one2" 1 -
one1=$(OMP_NUM_THREADS=1 "$ANNEAL" train --config "$cfg" --set train.threads=1 2>&1 | best)
printf "%-40s %10s %10.2f %14s\n" "tp=1: 1 process x 1 thread" "$one1" "$(echo "$one1 / $one2" | bc -l)" -
log=$(OMP_NUM_THREADS=1 "$ANNEAL" launch --nproc-per-node 2 -- "$ANNEAL" train --config "$cfg" --set dist.tp=2 \
  --set train.threads=1 2>&1 | sed 's/^\[rank 0\] //')
two=$(best <<<"$log")
mb=$(sed -n 's/.*rank 0 sent \([0-9.]*\) MB.*/\1/p' <<<"$log")
per_step=$(echo "$mb / $S" | bc -l)
# Expected per step: floats of (B,T,C) = N*C; (4L + 2) allreduces x 2(t-1)/t = 1 buffer each at t=2,
# plus the loss's all-gather: 2 doubles x N, (t-1) = 1. The run's total also holds the final
# validation forward (eval_batches 1: 2L + 1 allreduces and one all-gather), spread over the S=6 steps.
expect=$(echo "($S * (4 * $L + 2) + 2 * $L + 1) * $B * $T * $C * 4 / $S / 1000000 + ($S + 1) * 2 * 8 * $B * $T / $S / 1000000" | bc -l)
printf "%-40s %10s %10.2f %14.2f\n" "tp=2: 2 ranks x 1 thread" "$two" "$(echo "$two / $one2" | bc -l)" "$per_step"
printf "expected from the shape: %.2f MB per step per rank (%d steps and the final validation forward)\n" "$expect" "$S"
echo "RESULT tp_overhead tp1_2threads_ms=$one2 tp1_1thread_ms=$one1 tp2_ms=$two ratio_vs_tp1=$(printf %.2f "$(echo "$two / $one2" | bc -l)") mb_sent_per_step=$(printf %.2f "$per_step") mb_expected=$(printf %.2f "$expect")" >&2
