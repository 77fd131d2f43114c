#!/usr/bin/env bash
# bench/zero3_vs_fsdp: anneal's ZeRO-3 (dist.zero: 3) against PyTorch's FSDP2 (fully_shard on every
# block and the root, reshard_after_forward=True, gloo) on the CPU, data parallel over 2 processes,
# the same GPT-2-style model (tied embeddings, separate q/k/v in torch), the same per-rank batch and
# one thread per rank on both sides. Per side: the median step time after the warmup steps and rank
# 0's peak RSS (what each process really held: parameters, shards, gathers, gradients, moments,
# activations, the runtime). torch runs twice, as users run it (default malloc) and keeping freed
# memory (--keep-memory, faster on this VM); speed is compared with the faster, memory with the
# default run. Interleaved: anneal, torch default, torch keep, ROUNDS times (median of the rounds).
#   bench/zero3_vs_fsdp.sh [ANNEAL] [ROUNDS]
# Model: L=8, H=8, C=512, V=50257, T=128, B=2 a rank (50 M parameters, half of them the embeddings).
# BENCH_SMOKE=1: L=2, H=2, C=32, T=16, B=1, one round of 3 steps; the figures mean nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
ANNEAL=$(readlink -f "${1:-build/release/src/anneal}")
ROUNDS=${2:-2}
L=8 H=8 C=512 T=128 B=2 STEPS=6 WARM=2
if [ "${BENCH_SMOKE:-0}" = 1 ]; then
  L=2 H=2 C=32 T=16 B=1 STEPS=3 WARM=1 ROUNDS=1
  export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
fi
VENV=tools/venv/bin
[ -x "$VENV/torchrun" ] || { echo "zero3_vs_fsdp: $VENV/torchrun is missing: run scripts/setup.sh" >&2; exit 2; }
DATA=${DATA:-out/kjv}
[ -f "$DATA/dataset.json" ] || "$ANNEAL" prep --input data/kjv --output "$DATA" --val-fraction 0.05 --unit-mb 1 --quiet >/dev/null
TMP=$(mktemp -d /tmp/anneal_bench_zero3.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
cat >"$TMP/cfg.yaml" <<YAML
model: {vocab_size: 50257, max_seq_len: 1024, n_layer: $L, n_head: $H, n_embd: $C}
data: {dir: $DATA, seq_len: $T, batch_size: $B, seed: 1, verify_checksums: false}
optim: {lr: 3.0e-4, warmup_steps: 0, weight_decay: 0.1, grad_clip: 1.0}
train: {steps: $STEPS, log_every: 1, eval_every: 0, eval_batches: 1, seed: 1, threads: 1}
dist: {zero: 3}
YAML
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
median() { tr ' ' '\n' | grep . | sort -n | awk '{ a[NR] = $1 } END { print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }
declare -A ms rss
for round in $(seq "$ROUNDS"); do
  "$ANNEAL" launch --nproc-per-node 2 -- "$ANNEAL" train --config "$TMP/cfg.yaml" >"$TMP/anneal.log" 2>&1 ||
    { echo "zero3_vs_fsdp: anneal failed:" >&2; tail -5 "$TMP/anneal.log" >&2; exit 1; }
  ms[anneal]+="$(grep -E '^\[rank 0\] step +[0-9]+/' "$TMP/anneal.log" | tail -n +$((WARM + 1)) |
    sed -E 's/.* ([0-9.]+) ms .*/\1/' | median) "
  rss[anneal]+="$(sed -nE 's/.*peak RSS of rank 0: ([0-9.]+) MB.*/\1/p' "$TMP/anneal.log" | head -1) "
  for mem in default keep; do
    extra=(); [ $mem = keep ] && extra=(--keep-memory)
    "$VENV/torchrun" --standalone --nproc-per-node 2 bench/train_cpu_vs_torch_torch.py --fsdp --threads 1 \
      --steps $((STEPS - WARM)) --warmup "$WARM" --L $L --H $H --C $C --B $B --T $T "${extra[@]}" >"$TMP/t_$mem.log" 2>&1 ||
      { echo "zero3_vs_fsdp: torch FSDP ($mem) failed:" >&2; tail -5 "$TMP/t_$mem.log" >&2; exit 1; }
    ms[$mem]+="$(sed -nE 's/.*step ms min [0-9.]+ median ([0-9.]+) .*/\1/p' "$TMP/t_$mem.log") "
    rss[$mem]+="$(sed -nE 's/.*side=torch threads.* peak_rss_mb=([0-9.]+).*/\1/p' "$TMP/t_$mem.log") "
  done
done
a=$(median <<<"${ms[anneal]}") td=$(median <<<"${ms[default]}") tk=$(median <<<"${ms[keep]}")
ra=$(median <<<"${rss[anneal]}") rd=$(median <<<"${rss[default]}")
best=$td which=default; awk -v k="$tk" -v d="$td" 'BEGIN { exit !(k < d) }' && best=$tk which=keep
params=$(sed -nE 's/.*side=torch params=([0-9]+).*/\1/p' "$TMP/t_default.log")
version=$(sed -nE 's/.* torch=([^ ]+) .*/\1/p' "$TMP/t_default.log")
comm=$(sed -nE 's/.*handed its collectives ([0-9.]+) MB a step.*/\1/p' "$TMP/anneal.log")
printf '%-22s %12s %12s\n' "" "step ms" "rank 0 RSS MB"
printf '%-22s %12s %12s\n' "anneal ZeRO-3" "$a" "$ra" "torch FSDP2 default" "$td" "$rd" "torch FSDP2 keep-mem" "$tk" "$(median <<<"${rss[keep]}")"
speed=$(awk -v a="$a" -v b="$best" 'BEGIN { printf "%.2f", b / a }')
mem=$(awk -v a="$ra" -v b="$rd" 'BEGIN { printf "%.2f", b / a }')
echo "speed: torch's faster run ($which) over anneal's step time = ${speed}x; memory: torch default RSS over anneal's = ${mem}x" \
  "(dp 2, 1 thread a rank, L=$L C=$C T=$T B=$B a rank, $params parameters, torch $version, $ROUNDS rounds; anneal hands its collectives $comm MB a step)"
echo "RESULT bench=zero3_vs_fsdp dp=2 anneal_step_ms=$a torch_default_step_ms=$td torch_keep_memory_step_ms=$tk" \
  "faster_torch=$which speed_ratio=$speed anneal_rss_mb=$ra torch_default_rss_mb=$rd memory_ratio=$mem params=$params" \
  "torch=$version rounds=$ROUNDS anneal_comm_mb=$comm"
