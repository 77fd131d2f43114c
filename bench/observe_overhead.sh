#!/usr/bin/env bash
# What watching a run costs it (issue 22): the built-in trainer (L=2, C=128, T=128, B=8, 1 thread)
# run three ways, interleaved A B C A B C ... so slow drifts of the machine fall on all alike:
#   A  `anneal launch` alone (the peer: no server, no agent, no profiler)
#   B  the same with the step profiler on for every timed step (train.profile_steps)
#   C  as a job under the agent (it ships logs, step times and instance samples every second)
# Each run's figure is the mean step time of steps FROM..STEPS from the trainer's own lines; each way's
# is the median of ROUNDS (7) runs; the spread is the plain runs' (max - min) / median. An overhead is
# called "under 1 %" only when it is below both 1 % and that spread; otherwise the number is given.
# BENCH_SMOKE=1: 1 round of a 4-step L=2 C=32 T=32 B=2 trainer, steps 2-4: the figures mean nothing.
set -euo pipefail
source "$(dirname "$0")/train_lib.sh"
PY=/usr/bin/python3
if [ "$SMOKE" = 1 ]; then
  ROUNDS=1 STEPS=4 FROM=2 MODEL="n_layer: 2, n_head: 2, n_embd: 32" T=32 B=2
else
  ROUNDS=${ROUNDS:-7} STEPS=30 FROM=4 MODEL="n_layer: 2, n_head: 4, n_embd: 128" T=128 B=8
fi
TMP=$(mktemp -d /var/tmp/anneal_observe.XXXXXX); chmod 711 "$TMP"  # its jobs read files in it (tests/e2e/lib.sh)
"$ANNEAL" server --data-dir "$TMP/srv" --listen 127.0.0.1:0 --max-instances 1 >"$TMP/server.log" 2>&1 &
SERVER=$!
source "$(dirname "$0")/server_lib.sh"  # await_server, running, stop_server
trap 'stop_server; rm -rf "$TMP" "$cfg"' EXIT
await_server
write_config <<YAML
model: {vocab_size: 50257, max_seq_len: $T, $MODEL}
data: {dir: $DATA, seq_len: $T, batch_size: $B, seed: 1}
train: {steps: $STEPS, log_every: 1, eval_every: 0, eval_batches: 1, resume: none, threads: 1, peak_gflops: 100,
        profile_dir: $TMP/profile}
YAML
install -m 644 "$cfg" "$TMP/train.yaml"  # mktemp made it 0600: the job uid reads it
printf 'name: observed\nentrypoint: {command: [anneal, train, --config, %s]}\n' "$TMP/train.yaml" >"$TMP/job.yaml"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
mean_step() {  # the mean ms of steps FROM..STEPS in the trainer's lines on standard input
  sed -n "s/.*step \+\([0-9]\+\)\/$STEPS .* | \([0-9.]*\) ms | .*/\1 \2/p" |
    awk -v from=$FROM '$1 >= from { s += $2; n++ } END { if (n) printf "%.3f", s / n }'
}
need() { for v in "$@"; do [ -n "${!v:-}" ] || { echo "observe_overhead: no figure for $v" >&2; exit 1; }; done; }
a=() b=() c=()
echo "mean step time of steps $FROM-$STEPS, ms (1 thread):"
for round in $(seq 1 "$ROUNDS"); do
  a+=("$("$ANNEAL" launch --nproc-per-node 1 -- "$ANNEAL" train --config "$TMP/train.yaml" 2>&1 | mean_step)")
  b+=("$("$ANNEAL" launch --nproc-per-node 1 -- "$ANNEAL" train --config "$TMP/train.yaml" \
        --set train.profile_steps="$FROM,$STEPS" 2>&1 | mean_step)")
  id=$("$ANNEAL" submit "$TMP/job.yaml" --server "$URL" --wait --quiet 2>/dev/null)
  c+=("$("$ANNEAL" logs "$id" --server "$URL" --rank 0 | sed 's/^\[rank 0\] //' | mean_step)")
  need "a[-1]" "b[-1]" "c[-1]"
  echo "  round $round: launch ${a[-1]}, launch + profiler ${b[-1]}, job under the agent ${c[-1]}"
done
test -s "$TMP/profile/rank-00000.trace.json" || { echo "observe_overhead: the profiled runs wrote no trace" >&2; exit 1; }
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ma=$(median "${a[@]}") mb=$(median "${b[@]}") mc=$(median "${c[@]}")
spread=$(printf '%s\n' "${a[@]}" | sort -g | awk -v m="$ma" 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.2f", 100 * (hi - lo) / m }')
pb=$(awk -v x="$mb" -v m="$ma" 'BEGIN { printf "%.2f", 100 * (x - m) / m }')
pc=$(awk -v x="$mc" -v m="$ma" 'BEGIN { printf "%.2f", 100 * (x - m) / m }')
need ma mb mc spread pb pc
verdict() { awk -v p="$1" -v s="$spread" 'BEGIN { if (p < 1 && p < s) print "under 1 % (below 1 % and the spread)"; else printf "%+.2f %% (not claimed under 1 %%)\n", p }'; }
printf "  %-40s %9s ms\n" "anneal launch (peer), median" "$ma" "launch + profiler, median" "$mb" "job under the agent, median" "$mc"
echo "  spread of the plain runs: $spread % of their median ($ROUNDS runs)"
echo "  profiler: $pb % -> $(verdict "$pb")"
echo "  agent:    $pc % -> $(verdict "$pc")"
echo "RESULT step_ms_launch=$ma step_ms_profiled=$mb step_ms_job=$mc spread_pct=$spread profiler_overhead_pct=$pb profiler_overhead_pct_spread=$spread agent_overhead_pct=$pc agent_overhead_pct_spread=$spread rounds=$ROUNDS"
