#!/usr/bin/env bash
# bench/step_cost: the step cost model's prediction (anneal plan --device: one training step run through
# the model's own code on the cost backend, priced by the roofline; kernels/cost/) for GPT-2 124M at
# B=16 T=1024 in bf16 on an H200 (attention path 1 and path 2; then H100 and A100, path 1), and for a
# tiny GPT-2 (L=2, H=2, C=64, T=64, B=4). The whole table for GPT-2 124M on the H200 with path 1, the
# other configurations' totals, and Llama 3.2 1B at B=4 T=1024 (grouped-query attention, both
# paths); no device runs here: these are predictions, which
# bench/gpu/device_check.sh prints beside the measured op times when a GPU is lent.
#   bench/step_cost.sh [ANNEAL]
set -euo pipefail
cd "$(dirname "$0")/.."
ANNEAL=$(readlink -f "${1:-build/release/src/anneal}")
TMP=$(mktemp -d /tmp/anneal_bench_cost.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
cat >"$TMP/gpt2.yaml" <<'YAML'
model: {preset: gpt2}
data: {dir: unused, seq_len: 1024, batch_size: 16}
train: {dtype: bf16}
YAML
cat >"$TMP/llama1b.yaml" <<'YAML'
model: {preset: llama-3.2-1b, max_seq_len: 1024}
data: {dir: unused, seq_len: 1024, batch_size: 4}
train: {dtype: bf16}
YAML
cat >"$TMP/tiny.yaml" <<'YAML'
model: {vocab_size: 50257, max_seq_len: 64, n_layer: 2, n_head: 2, n_embd: 64}
data: {dir: unused, seq_len: 64, batch_size: 4}
train: {dtype: bf16}
YAML
result() {  # NAME CONFIG DEVICE PATH
  local out
  out=$("$ANNEAL" plan --config "$TMP/$2.yaml" --device "$3" --attention "$4")
  [ "$1" != gpt2_h200_gemm ] || sed -n '/one training step/,$p' <<<"$out"
  sed -nE "s/^predicted on [a-z0-9]+ .*: step ([0-9.]+) ms, ([0-9]+) launches, ([0-9]+) host synchronisations, .* ([0-9]+) tokens\/s, MFU ([0-9.]+)%.*/RESULT bench=step_cost config=$2 device=$3 attention=$4 step_ms=\1 launches=\2 host_syncs=\3 tokens_per_s=\4 mfu_pct=\5/p" <<<"$out"
}
result gpt2_h200_gemm gpt2 h200 gemm
for run in "gpt2 h200 flash" "gpt2 h100 gemm" "gpt2 a100 gemm" "llama1b h200 gemm" "llama1b h200 flash" "tiny h200 gemm" "tiny h200 flash"; do
  set -- $run
  result "$1_$2_$3" "$1" "$2" "$3"
done
