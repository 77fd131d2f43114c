#!/bin/bash
# Per-rank memory under each layout and recomputation mode, for one fixed model (4 layers, C=128,
# H=4, T=64, B=4, 4 micro-batches; tensor parallelism with and without sequence parallelism): parameters, activations allocated and our exact formula
# (ModelConfig::ActivationFloats, fp32, including the logits slice, the stage input and the backward
# scratch), and Korthikanti et al.'s per-layer estimate for the same local layers and micro-batches
# in flight (fp16 activations with dropout masks and attention scores, no logits or scratch: a
# different implementation, printed for scale). The trainer prints each rank's figures after step 1.
# BENCH_SMOKE=1: the same 18 runs of L=2 H=2 C=32, T=16, B=1, 2 micro-batches (figures mean nothing).
set -euo pipefail
# shellcheck source=bench/train_lib.sh
source "$(dirname "$0")/train_lib.sh"
L=4 H=4 C=128 T=64 B=4 M=4
[ "$SMOKE" = 0 ] || L=2 H=2 C=32 T=16 B=1 M=2
write_config <<YAML
model: {vocab_size: 50257, max_seq_len: $T, n_layer: $L, n_head: $H, n_embd: $C}
data: {dir: $DATA, seq_len: $T, batch_size: $B, seed: 1}
train: {steps: 1, log_every: 1, eval_every: 0, eval_batches: 1, peak_gflops: 100, threads: 1, grad_accum: $M}
YAML
export OMP_NUM_THREADS=1
printf "%-9s %-10s %-16s %10s %12s %12s %14s\n" "dp,tp,pp" recompute rank "params MB" "acts MB" "formula MB" "Korthikanti MB"
for layout in "1 1 false" "2 1 false" "2 1 true" "1 2 false" "2 2 false" "2 2 true"; do
  set -- $layout
  for rc in none selective full; do
    log=$(logged "$ANNEAL" launch --nproc-per-node $(($1 * $2)) -- "$ANNEAL" train --config "$cfg" --set dist.tp=$1 \
      --set dist.pp=$2 --set dist.sequence_parallel=$3 --set train.recompute=$rc 2>&1 | sed 's/^\[rank 0\] //')
    grep "^memory of rank" <<<"$log" | while read -r l; do
      r=$(sed -E 's/memory of rank ([0-9]+) \((.*)\):.*/\1 (\2)/' <<<"$l")
      p=$(sed -E 's/.*its part of the model ([0-9.]+) MB.*/\1/' <<<"$l")
      a=$(sed -E 's/.*activations ([0-9.]+) MB allocated.*/\1/' <<<"$l")
      f=$(sed -E 's/.*formula ([0-9.]+) MB.*/\1/' <<<"$l")
      k=$(sed -E 's/.*layers ([0-9.]+) MB.*/\1/' <<<"$l")
      sp=""; [ "$3" = true ] && sp="+sp"
      printf "%-9s %-10s %-16s %10s %12s %12s %14s\n" "1,$1,$2$sp" $rc "${r%% *}${r#* }" "$p" "$a" "$f" "$k"
      echo "RESULT parallel_memory tp=$1 pp=$2 sp=$3 recompute=$rc rank=${r%% *} params_mb=$p acts_mb=$a formula_mb=$f korthikanti_mb=$k" >&2
    done
  done
done
