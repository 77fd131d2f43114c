#!/bin/bash
# Per-rank optimizer memory at ZeRO 0/1/2 and dp = 1, 2, 4: what each rank allocated (printed by the
# trainer from its buffers' sizes) beside the formula, and rank 0's peak RSS. Model: L=4 C=256
# (N = 16.1 M floats with the padded vocabulary), fp32 parameters, gradients and Adam moments.
#   formula (bytes per rank): params 4N + grads 4N + moments 8N/(zero >= 1 ? dp : 1)
#                             + ZeRO-2 accumulated-gradient shard 4N/dp
set -euo pipefail
ANNEAL=${1:-build/release/src/anneal}
DATA=${DATA:-out/kjv}
[ -f "$DATA/dataset.json" ] || { echo "needs a prepared dataset in $DATA (make run prepares out/kjv)"; exit 2; }
cfg=$(mktemp --suffix=.yaml)
trap 'rm -f "$cfg"' EXIT
cat >"$cfg" <<YAML
model: {vocab_size: 50257, max_seq_len: 64, n_layer: 4, n_head: 4, n_embd: 256}
data: {dir: $DATA, seq_len: 64, batch_size: 1, seed: 1}
train: {steps: 2, log_every: 1, eval_every: 0, eval_batches: 1, peak_gflops: 100, threads: 1}
YAML
export OMP_NUM_THREADS=1
printf "%3s %5s %14s %14s %14s %12s\n" dp zero "moments MB" "formula MB" "zero-2 acc MB" "peak RSS MB"
for dp in 1 2 4; do
  for zero in 0 1 2; do
    out=$("$ANNEAL" launch --nproc-per-node $dp -- "$ANNEAL" train --config "$cfg" --set dist.zero=$zero 2>&1)
    line=$(echo "$out" | grep "per-rank optimizer memory" || true)
    n=$(echo "$out" | grep -o "[0-9]* parameters" | head -1 | cut -d' ' -f1)
    nf=$(echo "$line" | sed -n 's/.*params \([0-9.]*\) MB.*/\1/p')
    mom=$(echo "$line" | sed -n 's/.*Adam moments \([0-9.]*\) MB.*/\1/p')
    acc=$(echo "$line" | sed -n 's/.*gradient shard \([0-9.]*\) MB.*/\1/p')
    rss=$(echo "$out" | sed -n 's/.*peak RSS of rank 0: \([0-9.]*\) MB.*/\1/p')
    if [ -z "$line" ]; then mom="-"; fi
    div=$([ $zero -ge 1 ] && echo $dp || echo 1)
    formula=$(echo "2 * ${nf:-0} / $div" | bc -l)
    printf "%3s %5s %14s %14.1f %14s %12s\n" $dp $zero "${mom:-n/a}" "$formula" "${acc:--}" "${rss:-?}"
    echo "RESULT zero_memory dp=$dp zero=$zero moments_MB=${mom:-na} formula_MB=$(printf %.1f "$formula") acc_MB=${acc:-0} rss_MB=${rss:-na}" >&2
  done
done
