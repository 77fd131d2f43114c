#!/bin/bash
# Activation recomputation: memory saved and time paid, one process, the same model and batch under
# train.recompute = none, selective, full, one after the other in this run. Prints the activation
# memory the model allocated beside its formula (ModelConfig::ActivationFloats: every buffer of the
# fp32 CPU engine, model/config.cc), the step time, tokens/s and peak RSS; the ratio is each mode's
# step time over none's (full should cost about one extra forward: ~1.33x).
# Model: L=8 H=8 C=256, T=256, B=4 (activations dominate the memory).
# BENCH_SMOKE=1: the same three runs of L=2 H=2 C=32, T=16, B=1, 3 steps (figures mean nothing).
set -euo pipefail
# shellcheck source=bench/train_lib.sh
source "$(dirname "$0")/train_lib.sh"
L=8 H=8 C=256 T=256 B=4 S=6
[ "$SMOKE" = 0 ] || L=2 H=2 C=32 T=16 B=1 S=3
write_config <<YAML
model: {vocab_size: 50257, max_seq_len: $T, n_layer: $L, n_head: $H, n_embd: $C}
data: {dir: $DATA, seq_len: $T, batch_size: $B, seed: 1}
train: {steps: $S, log_every: 1, eval_every: 0, eval_batches: 1, peak_gflops: 100}
YAML
printf "%-10s %16s %12s %14s %10s %12s %7s\n" recompute "activations MB" "formula MB" "step ms (best)" "tok/s" "peak RSS MB" ratio
base=""
for mode in none selective full; do
  out=$(logged "$ANNEAL" train --config "$cfg" --set train.recompute=$mode 2>&1)
  act=$(echo "$out" | sed -n 's/.*activation memory of rank 0: \([0-9.]*\) MB allocated, formula \([0-9.]*\) MB.*/\1 \2/p')
  ms=$(echo "$out" | grep -E "^step +[2-6]/" | sed -n 's/.* | \([0-9]*\) ms | .*/\1/p' | sort -n | head -1)
  tps=$(echo "$out" | grep -E "^step +[2-6]/" | sed -n 's/.* | \([0-9]*\) tok\/s .*/\1/p' | sort -n | tail -1)
  rss=$(echo "$out" | sed -n 's/.*peak RSS of rank 0: \([0-9.]*\) MB.*/\1/p')
  base=${base:-$ms}
  ratio=$(echo "$ms / $base" | bc -l)
  printf "%-10s %16s %12s %14s %10s %12s %7.2f\n" $mode ${act% *} ${act#* } "$ms" "$tps" "$rss" "$ratio"
  echo "RESULT recompute mode=$mode activations_MB=${act% *} formula_MB=${act#* } step_ms=$ms tok_s=$tps rss_MB=$rss time_ratio=$(printf %.2f "$ratio")" >&2
done
