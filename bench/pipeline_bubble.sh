#!/bin/bash
# Pipeline bubble: 2 stages (one rank each, 1 thread) over m in {1, 2, 4, 8} micro-batches with the
# GPipe and 1F1B schedules. Each stage's idle fraction is measured by the trainer (time blocked on
# receives and sends over steps 2-4, divided by the step time) and printed beside the theoretical
# (p-1)/(m+p-1), which assumes equal stages. The model (16 layers of C=256 and GPT-2's vocabulary)
# gives stages of nearly equal estimated cost (the balancer's report is printed). Only p=2 is
# measured: with 2 cores, more stages would share cores and blocked time would not be idle time.
# BENCH_SMOKE=1: the same 8 runs of L=2 H=2 C=32, T=16, 2 steps (idle over step 2; figures mean nothing).
set -euo pipefail
# shellcheck source=bench/train_lib.sh
source "$(dirname "$0")/train_lib.sh"
L=16 H=4 C=256 T=64 S=4
[ "$SMOKE" = 0 ] || L=2 H=2 C=32 T=16 S=2
write_config <<YAML
model: {vocab_size: 50257, max_seq_len: $T, n_layer: $L, n_head: $H, n_embd: $C}
data: {dir: $DATA, seq_len: $T, batch_size: 1, seed: 1}
train: {steps: $S, log_every: 1, eval_every: 0, eval_batches: 1, peak_gflops: 100, threads: 1}
dist: {pp: 2}
YAML
export OMP_NUM_THREADS=1
printf "%-8s %3s %12s %12s %10s %12s\n" schedule m "stage 0 idle" "stage 1 idle" theory "step ms"
for sched in gpipe 1f1b; do
  for m in 1 2 4 8; do
    log=$(logged "$ANNEAL" launch --nproc-per-node 2 -- "$ANNEAL" train --config "$cfg" --set dist.schedule=$sched \
      --set train.grad_accum=$m 2>&1 | sed 's/^\[rank 0\] //')
    [ "$sched$m" = gpipe1 ] && grep -m1 "^pipeline: 2 stages" <<<"$log" >&2
    idle=$(grep "pipeline idle" <<<"$log")
    s0=$(sed -E 's/.*stage 0 ([0-9.]+)%.*/\1/' <<<"$idle")
    s1=$(sed -E 's/.*stage 1 ([0-9.]+)%.*/\1/' <<<"$idle")
    th=$(sed -E 's/.*= ([0-9.]+)%$/\1/' <<<"$idle")
    ms=$(grep -E "^step +[2-4]/" <<<"$log" | sed -n 's/.* | \([0-9]*\) ms | .*/\1/p' | sort -n | head -1)
    printf "%-8s %3d %11s%% %11s%% %9s%% %12s\n" $sched $m "$s0" "$s1" "$th" "$ms"
    echo "RESULT pipeline_bubble schedule=$sched m=$m stage0_idle_pct=$s0 stage1_idle_pct=$s1 theory_pct=$th step_ms=$ms" >&2
  done
done
