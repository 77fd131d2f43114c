#!/usr/bin/env bash
# bench/train_cpu_vs_torch: anneal against PyTorch on the CPU on the same model — GPT-2 style,
# 4 layers, 4 heads, C=256, T=256, B=8, V=50257, tied embeddings, AdamW, clipping — at 1 and 2
# threads (OMP_NUM_THREADS and OPENBLAS_NUM_THREADS set alike for every side), with the sgemm ceiling
# measured in the same run (bench/sgemm_peak: same threads, warm, best of 3, the model's own products;
# a side above 100 % of it fails the run). Three PyTorch peers: Debian's torch 1.13, torch 2 eager (tools/venv, from
# PyPI, fused AdamW) and torch 2 with torch.compile (inductor); each runs twice per thread count: as
# users run it (default) and with glibc keeping freed memory (--keep-memory, faster on this VM, whose
# first-touch page faults are slow). Speed is compared against the strongest of the six, memory
# (peak RSS) against the least of the three default runs — each table row names which. Also each side's fraction of the ceiling
# (FLOPs/token = 6N + 6*L*C*T). One run of each side per thread count (not a best of several).
#   bench/train_cpu_vs_torch.sh [ANNEAL] [STEPS]
#   DATA=DIR: anneal's prepared dataset (default out/kjv, prepared from data/kjv when missing)
#   FAMILY=llama: the llama-tiny preset instead (4 layers, 4 heads of which 2 key/value heads,
#   C=128, SwiGLU 384, tied embeddings; T=256, B=8) against transformers' LlamaForCausalLM (sdpa
#   attention) trained by torch 2 eager and compiled — Debian's torch 1.13 has no transformers —
#   each default and keep-memory; RESULT bench=train_cpu_llama (bench/train_llama_cpu_vs_torch.sh).
# BENCH_SMOKE=1: the same runs and rows at L=2, H=2, C=32, T=16, B=1, 2 steps (1 warmup, 1 timed) by
# default, OMP_WAIT_POLICY=PASSIVE unless set (as bench/train_lib.sh); the figures mean nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
ANNEAL=$(readlink -f "${1:-build/release/src/anneal}")
FAMILY=${FAMILY:-gpt2}
L=4 H=4 C=256 T=256 B=8 STEPS=${2:-8} WARM=2 KV=4 F=1024
[ "$FAMILY" = llama ] && C=128 KV=2 F=384
if [ "${BENCH_SMOKE:-0}" = 1 ]; then
  L=2 H=2 C=32 T=16 B=1 STEPS=${2:-2} WARM=1 KV=1 F=64
  export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
fi
SGEMM=$(dirname "$ANNEAL")/../bench/sgemm_peak
TMP=$(mktemp -d /tmp/anneal_bench_train.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
DATA=${DATA:-out/kjv}
[ -f "$DATA/dataset.json" ] || "$ANNEAL" prep --input data/kjv --output "$DATA" --val-fraction 0.05 --unit-mb 1 --quiet >/dev/null
MODEL="vocab_size: 50257, max_seq_len: 1024, n_layer: $L, n_head: $H, n_embd: $C"
[ "$FAMILY" = llama ] && MODEL="family: llama, $MODEL, n_kv_head: $KV, intermediate_size: $F, tie_embeddings: true"
cat >"$TMP/cfg.yaml" <<YAML
model: {$MODEL}
data: {dir: $DATA, seq_len: $T, batch_size: $B, seed: 1, verify_checksums: false}
optim: {lr: 3.0e-4, warmup_steps: 0, weight_decay: 0.1, grad_clip: 1.0}
train: {steps: $STEPS, log_every: 1, eval_every: 0, eval_batches: 1, seed: 1}
YAML
SIZE=(--L "$L" --H "$H" --C "$C" --B "$B" --T "$T" --family "$FAMILY" --KV "$KV" --F "$F")  # the model above, for the PyTorch side
VENV_PY=tools/venv/bin/python  # torch 2 from PyPI (scripts/setup.sh)
[ -x "$VENV_PY" ] || { echo "train_cpu_vs_torch: $VENV_PY is missing: run scripts/setup.sh" >&2; exit 2; }
# The PyTorch runs: NAME PYTHON [FLAGS]; each also with --keep-memory (NAME_keep).
TORCH_RUNS=("t113 /usr/bin/python3" "t2eager $VENV_PY" "t2compiled $VENV_PY --compile")
[ "$FAMILY" = llama ] && TORCH_RUNS=("t2eager $VENV_PY" "t2compiled $VENV_PY --compile")
BENCH=train_cpu; [ "$FAMILY" = llama ] && BENCH=train_cpu_llama
declare -A R
RESULTS=""
tok() { sed -nE 's/.*side=torch .*tokens_per_s=([0-9.]+).*/\1/p' "$1"; }
rss() { sed -nE 's/.*peak_rss_mb=([0-9.]+).*/\1/p' "$1"; }
for th in 1 2; do
  export OMP_NUM_THREADS=$th OPENBLAS_NUM_THREADS=$th
  # The ceiling at the same threads, warm, best of several, on the products this model runs (BT = B*T
  # rows): the LM head forward, input gradient and weight gradient, the attention's and MLP's.
  BT=$((B * T)) V=50257
  QKV=$((C + 2 * C / H * KV)) MLP_IN=$F; [ "$FAMILY" = llama ] && MLP_IN=$((2 * F))  # gate and up
  [ "$FAMILY" = llama ] || F=$((4 * C))
  "$SGEMM" --reps 3 ${BT}x${V}x${C}:nt ${BT}x${C}x${V}:nn ${V}x${C}x${BT}:tn ${BT}x${QKV}x${C}:nt \
    ${BT}x${MLP_IN}x${C}:nt ${BT}x${C}x${F}:nn ${F}x${C}x${BT}:tn >"$TMP/sgemm$th.log"
  sed 's/^/  sgemm /' "$TMP/sgemm$th.log" | grep -v RESULT
  R[sgemm$th]=$(sed -nE 's/.*sgemm_gflops=([0-9.]+).*/\1/p' "$TMP/sgemm$th.log")
  /usr/bin/time -f "%M" -o "$TMP/rss" "$ANNEAL" train --config "$TMP/cfg.yaml" >"$TMP/anneal$th.log" 2>&1
  # tokens/s: B*T tokens per step (2048) over the mean step time after the warmup steps
  R[anneal$th]=$(grep -E '^step +[0-9]+/' "$TMP/anneal$th.log" | awk -v w=$WARM -v bt=$((B * T)) '
    { for (i = 1; i <= NF; i++) if ($i == "ms") ms = $(i-1); n++; if (n > w) { s += ms; k++ } }
    END { printf "%.1f", bt * k / (s / 1000) }')
  R[anneal_rss$th]=$(awk '{ printf "%.0f", $1 / 1024 }' "$TMP/rss")
  # Each PyTorch twice: as users run it, and with glibc keeping freed memory (--keep-memory): torch
  # frees and re-allocates its ~400 MB logits every step, and first-touch page faults are slow here.
  for run in "${TORCH_RUNS[@]}"; do
    read -r name py flags <<<"$run"
    for mem in default keep; do
      extra=(); [ $mem = keep ] && extra=(--keep-memory)
      log=$TMP/${name}_$mem$th.log
      "$py" bench/train_cpu_vs_torch_torch.py --threads $th --steps $((STEPS - WARM)) --warmup $WARM "${SIZE[@]}" $flags "${extra[@]}" >"$log" 2>&1 ||
        { echo "train_cpu_vs_torch: $name ($mem) failed:" >&2; tail -5 "$log" >&2; exit 1; }
      R[${name}_$mem$th]=$(tok "$log") R[${name}_${mem}_rss$th]=$(rss "$log")
      R[version_$name]=$(sed -nE 's/.* torch=([^ ]+) .*/\1/p' "$log")
      R[compile_$name$th]=$(sed -nE 's/.* compile_s=([0-9.]+).*/\1/p' "$log")
    done
  done
done
params=$(sed -nE 's/.*, ([0-9]+) parameters;.*/\1/p' "$TMP/anneal1.log")
fpt=$(awk -v n="$params" -v l=$L -v c=$C -v t=$T 'BEGIN { print 6 * n + 6 * l * c * t }')
frac() { awk -v t="$1" -v f="$fpt" -v p="$2" 'BEGIN { printf "%.1f", 100 * t * f / (p * 1e9) }'; }
if [ "$FAMILY" = llama ]; then
  echo "PyTorch runs: transformers $(sed -nE 's/.* transformers=([^ ]+).*/\1/p' "$TMP/t2eager_default1.log") LlamaForCausalLM (sdpa) on torch ${R[version_t2eager]} (PyPI; fused AdamW), t2eager / t2compiled (torch.compile inductor); each default and keep-memory"
else
  echo "PyTorch runs: t113 = Debian's torch ${R[version_t113]} (OpenBLAS), t2eager / t2compiled = torch ${R[version_t2eager]} (PyPI; fused AdamW; torch.compile inductor); each default and keep-memory"
fi
printf '%-8s %12s %11s %11s %11s %11s %11s %11s %18s %6s %10s %13s %6s %8s %8s\n' threads "anneal tok/s" \
  "t113 def" "t113 keep" "t2eager def" "t2eager kp" "t2comp def" "t2comp kp" strongest ratio "anneal MB" "least torch MB" "MB x" "anneal %" "torch %"
for th in 1 2; do
  best=0 which="" least=0 least_which=""
  for run in "${TORCH_RUNS[@]}"; do
    read -r name _ <<<"$run"
    for mem in default keep; do
      v=${R[${name}_$mem$th]}
      if awk -v a="$v" -v b="$best" 'BEGIN { exit !(a > b) }'; then best=$v which=${name}_$mem; fi
    done
    m=${R[${name}_default_rss$th]}  # memory as users run it: default malloc; the least of the three
    if [ -z "$least_which" ] || awk -v a="$m" -v b="$least" 'BEGIN { exit !(a < b) }'; then least=$m least_which=${name}_default; fi
  done
  ratio=$(awk -v a="${R[anneal$th]}" -v b="$best" 'BEGIN { printf "%.2f", a / b }')
  mem=$(awk -v a="${R[anneal_rss$th]}" -v t="$least" 'BEGIN { printf "%.2f", t / a }')
  fa=$(frac "${R[anneal$th]}" "${R[sgemm$th]}") ft=$(frac "$best" "${R[sgemm$th]}")
  printf '%-8s %12s %11s %11s %11s %11s %11s %11s %18s %6s %10s %13s %6s %8s %8s\n' "$th" "${R[anneal$th]}" \
    "${R[t113_default$th]:--}" "${R[t113_keep$th]:--}" "${R[t2eager_default$th]}" "${R[t2eager_keep$th]}" \
    "${R[t2compiled_default$th]}" "${R[t2compiled_keep$th]}" "$which" "$ratio" "${R[anneal_rss$th]}" "$least" "$mem" "$fa" "$ft"
  per=""
  for run in "${TORCH_RUNS[@]}"; do
    read -r name _ <<<"$run"
    b=$(awk -v d="${R[${name}_default$th]}" -v k="${R[${name}_keep$th]}" 'BEGIN { print (d > k) ? d : k }')
    per+=" ratio_vs_$name=$(awk -v a="${R[anneal$th]}" -v b="$b" 'BEGIN { printf "%.2f", a / b }')"
    per+=" ${name}_default_tokens_per_s=${R[${name}_default$th]} ${name}_keep_memory_tokens_per_s=${R[${name}_keep$th]}"
    per+=" ${name}_default_rss_mb=${R[${name}_default_rss$th]} ${name}_keep_memory_rss_mb=${R[${name}_keep_rss$th]}"
  done
  RESULTS+="RESULT bench=$BENCH threads=$th anneal_tokens_per_s=${R[anneal$th]} faster_torch=$which ratio_vs_faster=$ratio anneal_rss_mb=${R[anneal_rss$th]} least_torch_rss=$least_which memory_ratio_vs_default=$mem sgemm_gflops=${R[sgemm$th]} anneal_frac_of_sgemm=$fa torch_frac_of_sgemm=$ft torch_compile_s=${R[compile_t2compiled$th]}$per
"
done
RESULTS=${RESULTS%$'\n'}
# A side above 100 % of the measured ceiling means the ceiling or the FLOP count is wrong: no figure of
# this run can be trusted.
over=$(grep -oE 'threads=[12] .*anneal_frac_of_sgemm=[0-9.]+ torch_frac_of_sgemm=[0-9.]+' <<<"$RESULTS" |
  awk '{ for (i = 1; i <= NF; i++) if ($i ~ /frac_of_sgemm=/) { split($i, kv, "="); if (kv[2] + 0 > 100) print $1 " " $i } }' || true)
echo "$RESULTS"
if [ -n "$over" ]; then
  echo "train_cpu_vs_torch: above 100 % of the measured sgemm ceiling ($(tr '\n' ' ' <<<"$over")): the ceiling or the FLOP count is wrong" >&2
  exit 1
fi
echo "(ratio: anneal tok/s over the strongest of the ${#TORCH_RUNS[@]}x2 torch runs; MB x: the least peak RSS of the ${#TORCH_RUNS[@]} torch runs as users run them (default malloc) over anneal's)"
echo "(FLOPs/token = 6N + 6*L*C*T = $fpt with N = $params parameters)"
