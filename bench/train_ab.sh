#!/usr/bin/env bash
# bench/train_ab: two anneal binaries (a refactor's start and end) trained alternately on
# train_cpu_vs_torch's model and data — start, end, start, end, ... — so slow drifts of the machine
# fall on both alike. Prints each run's tokens/s (2048 tokens per step over the mean step time of
# steps 3..8) and both means with their ratio.
#   bench/train_ab.sh START_ANNEAL END_ANNEAL [THREADS] [ROUNDS]
#   DATA=DIR: the prepared dataset (default out/kjv, prepared from data/kjv when missing)
# BENCH_SMOKE=1: L=2, H=2, C=32, T=16, B=1, 3 steps (step 3 timed), 1 round unless ROUNDS is given,
# OMP_WAIT_POLICY=PASSIVE unless set (as bench/train_lib.sh); the figures mean nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: bench/train_ab.sh START_ANNEAL END_ANNEAL [THREADS] [ROUNDS]" >&2; exit 2; }
START=$(readlink -f "$1") END=$(readlink -f "$2") TH=${3:-1} ROUNDS=${4:-3}
L=4 H=4 C=256 T=256 B=8 STEPS=8
if [ "${BENCH_SMOKE:-0}" = 1 ]; then
  L=2 H=2 C=32 T=16 B=1 STEPS=3 ROUNDS=${4:-1}
  export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
fi
for b in "$START" "$END"; do [ -x "$b" ] || { echo "not an executable: $b (build it first)" >&2; exit 2; }; done
TMP=$(mktemp -d /tmp/anneal_bench_ab.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
DATA=${DATA:-out/kjv}
[ -f "$DATA/dataset.json" ] || "$END" prep --input data/kjv --output "$DATA" --val-fraction 0.05 --unit-mb 1 --quiet >/dev/null
cat >"$TMP/cfg.yaml" <<YAML
model: {vocab_size: 50257, max_seq_len: 1024, n_layer: $L, n_head: $H, n_embd: $C}
data: {dir: $DATA, seq_len: $T, batch_size: $B, seed: 1, verify_checksums: false}
optim: {lr: 3.0e-4, warmup_steps: 0, weight_decay: 0.1, grad_clip: 1.0}
train: {steps: $STEPS, log_every: 1, eval_every: 0, eval_batches: 1, seed: 1}
YAML
export OMP_NUM_THREADS=$TH OPENBLAS_NUM_THREADS=$TH
for i in $(seq "$ROUNDS"); do
  for side in start end; do
    bin=$START; [ "$side" = end ] && bin=$END
    "$bin" train --config "$TMP/cfg.yaml" >"$TMP/$side.log" 2>&1
    tps=$(grep -E '^step +[0-9]+/' "$TMP/$side.log" | awk -v bt=$((B * T)) '
      { for (i = 1; i <= NF; i++) if ($i == "ms") ms = $(i-1); n++; if (n > 2) { s += ms; k++ } }
      END { printf "%.1f", bt * k / (s / 1000) }')
    echo "round $i $side tok/s $tps"
    echo "$side $tps" >>"$TMP/all"
  done
done
awk -v th="$TH" '{ s[$1] += $2; n[$1]++ }
  END { a = s["start"] / n["start"]; b = s["end"] / n["end"];
        printf "RESULT bench=train_ab threads=%s start_tok_s=%.1f end_tok_s=%.1f ratio=%.3f\n", th, a, b, b / a }' "$TMP/all"
