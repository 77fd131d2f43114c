#!/bin/bash
# Per-rank optimizer memory at ZeRO 0/1/2 and dp = 1, 2, 4, measured (what each rank allocated, from
# its buffers' sizes, and rank 0's peak RSS) beside the formula. Model: GPT-2 small's shape (L=12,
# H=12, C=768; N = 124.5 M floats with the padded vocabulary), T=64, B=1, two steps; fp32 throughout.
#   formula, bytes per rank: params 4N + gradients (4N; ZeRO-2: 4N/dp accumulated + the per-range
#   buffers backward holds at once) + Adam moments 8N / (ZeRO >= 1 ? dp : 1)
# BENCH_SMOKE=1: the same 9 runs of a model of L=2, H=2, C=32, T=16 (figures mean nothing).
set -euo pipefail
# shellcheck source=bench/train_lib.sh
source "$(dirname "$0")/train_lib.sh"
L=12 H=12 C=768 T=64
[ "$SMOKE" = 0 ] || L=2 H=2 C=32 T=16
write_config <<YAML
model: {vocab_size: 50257, max_seq_len: $T, n_layer: $L, n_head: $H, n_embd: $C}
data: {dir: $DATA, seq_len: $T, batch_size: 1, seed: 1}
train: {steps: 2, log_every: 1, eval_every: 0, eval_batches: 1, peak_gflops: 100, threads: 1}
YAML
export OMP_NUM_THREADS=1
printf "%3s %5s %10s %12s %12s %12s %14s %12s\n" dp zero "params MB" "grads MB" "moments MB" "formula MB" "ZeRO-2 bufs MB" "peak RSS MB"
for dp in 1 2 4; do
  for zero in 0 1 2; do
    out=$("$ANNEAL" launch --nproc-per-node $dp -- "$ANNEAL" train --config "$cfg" --set dist.zero=$zero 2>&1)
    line=$(echo "$out" | grep "per-rank optimizer memory")
    p=$(echo "$line" | sed -n 's/.*params \([0-9.]*\) MB.*/\1/p')
    g=$(echo "$line" | sed -n 's/.*grads \([0-9.]*\) MB.*/\1/p')
    mom=$(echo "$line" | sed -n 's/.*Adam moments \([0-9.]*\) MB.*/\1/p')
    acc=$(echo "$line" | sed -n 's/.*gradient shard \([0-9.]*\) MB.*/\1/p')
    bufs=$(echo "$out" | sed -n 's/.*at most \([0-9.]*\) MB of gradient buffers.*/\1/p')
    rss=$(echo "$out" | sed -n 's/.*peak RSS of rank 0: \([0-9.]*\) MB.*/\1/p')
    div=$([ $zero -ge 1 ] && echo $dp || echo 1)
    formula=$(echo "2 * $p / $div" | bc -l)
    grads=$([ $zero = 2 ] && echo "$g+$acc" || echo "$g")
    printf "%3s %5s %10s %12s %12s %12.1f %14s %12s\n" $dp $zero "$p" "$grads" "$mom" "$formula" "${bufs:--}" "$rss"
    echo "RESULT zero_memory dp=$dp zero=$zero params_MB=$p grads_MB=$g acc_MB=${acc:-0} moments_MB=$mom formula_MB=$(printf %.1f "$formula") zero2_buffers_MB=${bufs:-0} rss_MB=$rss" >&2
  done
done
