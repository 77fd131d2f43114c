#!/usr/bin/env bash
# bench/train_cpu_vs_torch: anneal against PyTorch (Debian's torch 1.13, CPU) on the same model —
# GPT-2 style, 4 layers, 4 heads, C=256, T=256, B=8, V=50257, tied embeddings, AdamW, clipping —
# at 1 and 2 threads (OMP_NUM_THREADS and OPENBLAS_NUM_THREADS set alike for both sides), with the
# sgemm ceiling measured in the same run. PyTorch runs twice per thread count: as users run it
# (default) and with glibc keeping freed memory (--keep-memory, faster on this VM, whose first-touch
# page faults are slow). Speed is compared against the faster of the two, memory (peak RSS) against
# the default run — each table row names which. Also each side's fraction of the ceiling
# (FLOPs/token = 6N + 6*L*C*T). One run of each side per thread count (not a best of several).
#   bench/train_cpu_vs_torch.sh [ANNEAL] [STEPS]
#   DATA=DIR: anneal's prepared dataset (default out/kjv, prepared from data/kjv when missing)
# BENCH_SMOKE=1: the same runs and rows at L=2, H=2, C=32, T=16, B=1, 2 steps (1 warmup, 1 timed) by
# default, OMP_WAIT_POLICY=PASSIVE unless set (as bench/train_lib.sh); the figures mean nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
ANNEAL=$(readlink -f "${1:-build/release/src/anneal}")
L=4 H=4 C=256 T=256 B=8 STEPS=${2:-8} WARM=2
if [ "${BENCH_SMOKE:-0}" = 1 ]; then
  L=2 H=2 C=32 T=16 B=1 STEPS=${2:-2} WARM=1
  export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
fi
SGEMM=$(dirname "$ANNEAL")/../bench/sgemm_peak
TMP=$(mktemp -d /tmp/anneal_bench_train.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
DATA=${DATA:-out/kjv}
[ -f "$DATA/dataset.json" ] || "$ANNEAL" prep --input data/kjv --output "$DATA" --val-fraction 0.05 --unit-mb 1 --quiet >/dev/null
cat >"$TMP/cfg.yaml" <<YAML
model: {vocab_size: 50257, max_seq_len: 1024, n_layer: $L, n_head: $H, n_embd: $C}
data: {dir: $DATA, seq_len: $T, batch_size: $B, seed: 1, verify_checksums: false}
optim: {lr: 3.0e-4, warmup_steps: 0, weight_decay: 0.1, grad_clip: 1.0}
train: {steps: $STEPS, log_every: 1, eval_every: 0, eval_batches: 1, seed: 1}
YAML
SIZE=(--L "$L" --H "$H" --C "$C" --B "$B" --T "$T")  # the model above, for the PyTorch side
declare -A R
for th in 1 2; do
  export OMP_NUM_THREADS=$th OPENBLAS_NUM_THREADS=$th
  R[sgemm$th]=$("$SGEMM" | sed -nE 's/.*sgemm_gflops=([0-9.]+).*/\1/p')
  /usr/bin/time -f "%M" -o "$TMP/rss" "$ANNEAL" train --config "$TMP/cfg.yaml" >"$TMP/anneal$th.log" 2>&1
  # tokens/s: B*T tokens per step (2048) over the mean step time after the warmup steps
  R[anneal$th]=$(grep -E '^step +[0-9]+/' "$TMP/anneal$th.log" | awk -v w=$WARM -v bt=$((B * T)) '
    { for (i = 1; i <= NF; i++) if ($i == "ms") ms = $(i-1); n++; if (n > w) { s += ms; k++ } }
    END { printf "%.1f", bt * k / (s / 1000) }')
  R[anneal_rss$th]=$(awk '{ printf "%.0f", $1 / 1024 }' "$TMP/rss")
  # PyTorch twice: as users run it, and with glibc keeping freed memory (--keep-memory): torch frees
  # and re-allocates its ~400 MB logits every step, and first-touch page faults are slow on this VM.
  /usr/bin/python3 bench/train_cpu_vs_torch_torch.py --threads $th --steps $((STEPS - WARM)) --warmup $WARM "${SIZE[@]}" >"$TMP/torchd$th.log" 2>&1
  R[torchd$th]=$(sed -nE 's/.*side=torch .*tokens_per_s=([0-9.]+).*/\1/p' "$TMP/torchd$th.log")
  R[torchd_rss$th]=$(sed -nE 's/.*peak_rss_mb=([0-9.]+).*/\1/p' "$TMP/torchd$th.log")
  /usr/bin/python3 bench/train_cpu_vs_torch_torch.py --threads $th --steps $((STEPS - WARM)) --warmup $WARM "${SIZE[@]}" --keep-memory >"$TMP/torch$th.log" 2>&1
  R[torch$th]=$(sed -nE 's/.*side=torch .*tokens_per_s=([0-9.]+).*/\1/p' "$TMP/torch$th.log")
  R[torch_rss$th]=$(sed -nE 's/.*peak_rss_mb=([0-9.]+).*/\1/p' "$TMP/torch$th.log")
done
params=$(sed -nE 's/.*, ([0-9]+) parameters;.*/\1/p' "$TMP/anneal1.log")
fpt=$(awk -v n="$params" -v l=$L -v c=$C -v t=$T 'BEGIN { print 6 * n + 6 * l * c * t }')
printf '%-8s %12s %14s %14s %18s %6s %10s %16s %15s %7s %9s %9s\n' threads "anneal tok/s" "torch default" "torch keep-mem" "faster torch" ratio "anneal MB" "torch default MB" "torch keep MB" "MB x" "anneal %" "torch %"
for th in 1 2; do
  best=${R[torch$th]} which=keep-memory
  if awk -v d="${R[torchd$th]}" -v k="${R[torch$th]}" 'BEGIN { exit !(d > k) }'; then best=${R[torchd$th]} which=default; fi
  ratio=$(awk -v a="${R[anneal$th]}" -v b="$best" 'BEGIN { printf "%.2f", a / b }')
  mem=$(awk -v a="${R[anneal_rss$th]}" -v t="${R[torchd_rss$th]}" 'BEGIN { printf "%.2f", t / a }')
  fa=$(awk -v t="${R[anneal$th]}" -v f="$fpt" -v p="${R[sgemm$th]}" 'BEGIN { printf "%.1f", 100 * t * f / (p * 1e9) }')
  ft=$(awk -v t="$best" -v f="$fpt" -v p="${R[sgemm$th]}" 'BEGIN { printf "%.1f", 100 * t * f / (p * 1e9) }')
  printf '%-8s %12s %14s %14s %18s %6s %10s %16s %15s %7s %9s %9s\n' "$th" "${R[anneal$th]}" "${R[torchd$th]}" "${R[torch$th]}" \
    "$which" "$ratio" "${R[anneal_rss$th]}" "${R[torchd_rss$th]}" "${R[torch_rss$th]}" "$mem" "$fa" "$ft"
  echo "RESULT bench=train_cpu threads=$th anneal_tokens_per_s=${R[anneal$th]} torch_default_tokens_per_s=${R[torchd$th]} torch_keep_memory_tokens_per_s=${R[torch$th]} faster_torch=$which ratio_vs_faster=$ratio anneal_rss_mb=${R[anneal_rss$th]} torch_default_rss_mb=${R[torchd_rss$th]} torch_keep_memory_rss_mb=${R[torch_rss$th]} memory_ratio_vs_default=$mem sgemm_gflops=${R[sgemm$th]} anneal_frac_of_sgemm=$fa torch_frac_of_sgemm=$ft"
done
echo "(ratio: anneal tok/s over the faster torch run's; MB x: torch default's peak RSS over anneal's)"
echo "(FLOPs/token = 6N + 6*L*C*T = $fpt with N = $params parameters)"
