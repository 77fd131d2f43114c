#!/bin/bash
# Per-rank device memory at ZeRO 0/1/2/3 and dp = 1, 2, 4 (and dp 4 in shard groups of 2): each rank's
# measured peak in step 1 (the allocator's high-water mark: every parameter, gradient, moment,
# activation and data-parallel buffer) beside the trainer's formula (parallel/memory_plan.h, what
# `anneal plan` prints before a run), and rank 0's peak RSS. Then ZeRO-3 against ZeRO-1 in one run at
# dp 2, interleaved (1, 3, 1, 3): the step time (median of steps 2..6 of both runs of each) and the
# bytes each rank hands its collectives a step, beside the ratio the shapes predict —
#   ZeRO-1: reduce-scatter 4N + all-gather 4N;  ZeRO-3: reduce-scatter 4N + every layer gathered
#   twice (forward, backward) + the embeddings and head once: 4N + 8 N_layers + 4 N_root
# (1.5x when the layers are all of N). Model: GPT-2 small's shape (L=12, H=12, C=768; N = 124.5 M
# floats with the padded vocabulary), T=64, B=1, fp32, one thread per rank; then bf16 peaks (a smaller
# model on ref's emulated bf16) at ZeRO 0-3, fp32 and bf16 reduction.
# BENCH_SMOKE=1: the same runs of a model of L=2, H=2, C=32, T=16 (figures mean nothing).
set -euo pipefail
# shellcheck source=bench/train_lib.sh
source "$(dirname "$0")/train_lib.sh"
L=12 H=12 C=768 T=64 STEPS=6
[ "$SMOKE" = 0 ] || { L=2 H=2 C=32 T=16 STEPS=3; }
write_config <<YAML
model: {vocab_size: 50257, max_seq_len: $T, n_layer: $L, n_head: $H, n_embd: $C}
data: {dir: $DATA, seq_len: $T, batch_size: 1, seed: 1}
train: {steps: 2, log_every: 1, eval_every: 0, eval_batches: 1, peak_gflops: 100, threads: 1}
YAML
export OMP_NUM_THREADS=1
num() { sed -nE "s/$1/\\1/p" | head -1; }
printf "%3s %5s %5s %12s %12s %9s %12s\n" dp zero K "peak MB" "formula MB" "dev %" "peak RSS MB"
for layout in "1 0 0" "1 1 0" "1 2 0" "1 3 0" "2 0 0" "2 1 0" "2 2 0" "2 3 0" "4 0 0" "4 1 0" "4 2 0" "4 3 0" "4 3 2"; do
  set -- $layout
  out=$(logged "$ANNEAL" launch --nproc-per-node "$1" -- "$ANNEAL" train --config "$cfg" --set dist.zero="$2" \
    --set dist.shard_group="$3" 2>&1)
  line=$(grep "memory of rank 0 " <<<"$out")
  peak=$(num '.*: peak ([0-9.]+) MB allocated.*' <<<"$line")
  formula=$(num '.*mark\), formula ([0-9.]+) MB.*' <<<"$line")
  dev=$(num '.*formula [0-9.]+ MB \(([+-][0-9.]+)%\).*' <<<"$line")
  rss=$(num '.*peak RSS of rank 0: ([0-9.]+) MB.*' <<<"$out")
  printf "%3s %5s %5s %12s %12s %9s %12s\n" "$1" "$2" "$3" "$peak" "$formula" "$dev" "$rss"
  echo "RESULT zero_memory dp=$1 zero=$2 shard_group=$3 peak_MB=$peak formula_MB=$formula deviation_pct=$dev rss_MB=$rss" >&2
done

# bf16 (ref's emulated bf16: the cpu kernels are fp32 only, so a smaller model, L=4, H=4, C=256): bf16
# parameters, activations and gradients, fp32 masters and moments as ZeRO shards them, gradients reduced
# in fp32 (and at ZeRO 3 in bf16, dist.reduce_dtype) — peaks beside the formula at dp 2.
bf_sets="--set model.n_layer=4 --set model.n_head=4 --set model.n_embd=256 --set train.kernels=ref --set train.dtype=bf16"
[ "$SMOKE" = 0 ] || bf_sets="--set train.kernels=ref --set train.dtype=bf16"
printf "bf16, L=4 C=256 on ref:\n%3s %5s %7s %12s %12s %9s\n" dp zero reduce "peak MB" "formula MB" "dev %"
for layout in "2 0 f32" "2 1 f32" "2 2 f32" "2 3 f32" "2 3 bf16"; do
  set -- $layout
  # shellcheck disable=SC2086
  out=$(logged "$ANNEAL" launch --nproc-per-node "$1" -- "$ANNEAL" train --config "$cfg" $bf_sets --set dist.zero="$2" \
    --set dist.reduce_dtype="$3" 2>&1)
  line=$(grep "memory of rank 0 " <<<"$out")
  peak=$(num '.*: peak ([0-9.]+) MB allocated.*' <<<"$line")
  formula=$(num '.*mark\), formula ([0-9.]+) MB.*' <<<"$line")
  dev=$(num '.*formula [0-9.]+ MB \(([+-][0-9.]+)%\).*' <<<"$line")
  printf "%3s %5s %7s %12s %12s %9s\n" "$1" "$2" "$3" "$peak" "$formula" "$dev"
  echo "RESULT zero_memory_bf16 dp=$1 zero=$2 reduce=$3 peak_MB=$peak formula_MB=$formula deviation_pct=$dev" >&2
done

# ZeRO-3 against ZeRO-1 at dp 2: step time and bytes handed to the collectives.
declare -A ms comm
for round in 1 2; do
  for zero in 1 3; do
    out=$(logged "$ANNEAL" launch --nproc-per-node 2 -- "$ANNEAL" train --config "$cfg" --set dist.zero=$zero \
      --set train.steps=$STEPS 2>&1)
    ms[$zero]+="$(grep -E '^\[rank 0\] step +[0-9]+/' <<<"$out" | tail -n +2 | sed -E 's/.* ([0-9]+) ms .*/\1/') "
    comm[$zero]=$(num '.*handed its collectives ([0-9.]+) MB a step.*' <<<"$out")
  done
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{ a[NR] = $1 } END { print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }
m1=$(median <<<"${ms[1]}") m3=$(median <<<"${ms[3]}")
expected=$(python3 -c "
V, T, L, C = 50304, $T, $L, $C
layer = 12 * C * C + 13 * C
root = V * C + T * C + 2 * C
n = root + L * layer
print(f'{(4 * n + 8 * L * layer + 4 * root) / (8 * n):.3f}')")
ratio=$(awk -v a="${comm[3]}" -v b="${comm[1]}" 'BEGIN { printf "%.3f", a / b }')
tratio=$(awk -v a="$m3" -v b="$m1" 'BEGIN { printf "%.2f", a / b }')
echo "ZeRO-3 vs ZeRO-1 at dp 2: step $m3 ms vs $m1 ms (${tratio}x); collectives ${comm[3]} MB vs ${comm[1]} MB a step" \
  "(${ratio}x; the shapes predict ${expected}x)"
echo "RESULT zero3_vs_zero1 dp=2 zero1_step_ms=$m1 zero3_step_ms=$m3 time_ratio=$tratio zero1_comm_MB=${comm[1]}" \
  "zero3_comm_MB=${comm[3]} comm_ratio=$ratio expected_comm_ratio=$expected" >&2
