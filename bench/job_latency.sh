#!/usr/bin/env bash
# The control plane's own cost, on the local backend, side by side with `anneal launch` (the same
# launcher without a server, an agent or a package) in this run:
#   1. start latency: from the moment `anneal submit` is invoked to the rank's first instruction (the
#      rank prints its own clock), median of 5 jobs — beside `anneal launch` invoked the same way;
#      the job's history splits it into queueing, obtaining the instance, and the agent's preparation.
#      Each round starts a sandboxed job (the default as root: its uid, mount namespace, cgroup), an
#      admin's `sandbox: false` job and the launch, interleaved: the sandbox's own start-up cost is
#      the difference of the first two; and, where podman is installed, the same job with image: (a
#      container of an image of date and sh imported from a local tar). (Run it as root: as another
#      user the server's agents refuse sandboxed jobs.)
#   2. the agent's overhead on a training step: the built-in trainer (L=2, C=128, T=128, B=8) run by
#      `anneal launch` and as a job (the agent shipping its logs, step times and system metrics every
#      second), alternating A B A B A B; mean step time of steps 6-40 from the trainer's own lines.
#   3. a 2-instance job's start (bench/multi_start_lib.sh): where the instances meet, through the
#      server, in the health round's collective and at the start. With a second binary
#      (JOB_LATENCY_BEFORE=BEFORE_ANNEAL, or bench/job_latency.sh ANNEAL BEFORE_ANNEAL), a server of
#      each runs side by side and their jobs alternate: a change's before and after, interleaved, with
#      their ratio. JOB_LATENCY_ONLY=multi
#      runs this part alone. JOB_LATENCY_REPS=N: N starts per median (default 5).
# Targets (issue 8): start under 1 s; agent overhead under 1 %.
# BENCH_SMOKE=1: 1 start of each; 1 round (A B) of a 4-step L=2 C=32 T=32 B=2 trainer, mean of steps 2-4:
# figures mean nothing.
set -euo pipefail
source "$(dirname "$0")/train_lib.sh"
PY=/usr/bin/python3
if [ "$SMOKE" = 1 ]; then
  REPS=1 ROUNDS=1 STEPS=4 FROM=2 MODEL="n_layer: 2, n_head: 2, n_embd: 32" T=32 B=2
else
  REPS=5 ROUNDS=3 STEPS=40 FROM=6 MODEL="n_layer: 2, n_head: 4, n_embd: 128" T=128 B=8
fi
REPS=${JOB_LATENCY_REPS:-$REPS}  # starts per median
# need NAME...: fails, naming them, unless every variable has a value (no RESULT with empty fields)
need() { for v in "$@"; do [ -n "${!v:-}" ] || { echo "job_latency: no figure for $v" >&2; exit 1; }; done; }
TMP=$(mktemp -d /var/tmp/anneal_job_latency.XXXXXX); chmod 711 "$TMP"  # its jobs read files in it (tests/e2e/lib.sh)
"$ANNEAL" server --data-dir "$TMP/srv" --listen 127.0.0.1:0 --max-instances 1 >"$TMP/server.log" 2>&1 &
SERVER=$!
source "$(dirname "$0")/server_lib.sh"  # await_server, running, stop_server
source "$(dirname "$0")/multi_start_lib.sh"  # multi_start
trap 'stop_server; multi_stop after; multi_stop before; rm -rf "$TMP" "$cfg"' EXIT
await_server
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
if [ "${JOB_LATENCY_ONLY:-}" = multi ]; then multi_start "$ANNEAL" "${2:-${JOB_LATENCY_BEFORE:-}}"; exit 0; fi

cat >"$TMP/hello.yaml" <<'YAML'
name: hello
entrypoint: {command: 'date +%s.%N'}
YAML
{ cat "$TMP/hello.yaml"; echo "sandbox: false"; } >"$TMP/hello_open.yaml"
# The same in a container (image:) of an image with date and sh, imported from a local tar.
IMAGE=""
if command -v podman >/dev/null && [ "$(id -u)" = 0 ]; then
  source "$(dirname "$0")/../scripts/host_image.sh"
  import_host_image anneal-bench/hello:1 /bin/date /bin/sh && IMAGE=anneal-bench/hello:1
  { cat "$TMP/hello.yaml"; echo "image: $IMAGE"; } >"$TMP/hello_image.yaml"
fi
# job_start SPEC LATENCY_FILE [PHASES_FILE]: submits SPEC, appends its start latency (and phases)
job_start() {
  local t0 id line
  t0=$(date +%s.%N)
  id=$("$ANNEAL" submit "$1" --server "$URL")
  for _ in $(seq 1 600); do
    line=$("$ANNEAL" logs "$id" --server "$URL" --rank 0 | head -1)
    [ -n "$line" ] && break
    sleep 0.02
  done
  need line
  awk -v a="$t0" -v b="${line##* }" 'BEGIN { printf "%.4f\n", b - a }' >>"$2"
  # Ended, so that the next start finds the instance free (--max-instances 1)
  for _ in $(seq 1 600); do
    [ "$("$ANNEAL" describe "$id" --server "$URL" --json | $PY -c 'import json,sys; print(json.load(sys.stdin)["status"])')" = Completed ] && break
    sleep 0.05
  done
  [ -n "${3:-}" ] || return 0
  "$ANNEAL" describe "$id" --server "$URL" --json | $PY -c '
import json, sys
j = json.load(sys.stdin); h = {x["secondary_status"]: x["at"] for x in j["history"]}
print("%.4f %.4f %.4f" % (h["Starting"] - h["Pending"], h["Downloading"] - h["Starting"], h["Training"] - h["Downloading"]))' >>"$3"
}
echo "start latency (median of $REPS):"
: >"$TMP/job.lat"; : >"$TMP/open.lat"; : >"$TMP/image.lat"; : >"$TMP/launch.lat"; : >"$TMP/phases"
for i in $(seq 1 $REPS); do
  job_start "$TMP/hello.yaml" "$TMP/job.lat" "$TMP/phases"
  sleep 0.5
  job_start "$TMP/hello_open.yaml" "$TMP/open.lat"
  if [ -n "$IMAGE" ]; then sleep 0.5; job_start "$TMP/hello_image.yaml" "$TMP/image.lat"; fi
  t0=$(date +%s.%N)
  t1=$("$ANNEAL" launch --nproc-per-node 1 -- sh -c 'date +%s.%N' 2>/dev/null | tail -1)
  need t1
  awk -v a="$t0" -v b="${t1##* }" 'BEGIN { printf "%.4f\n", b - a }' >>"$TMP/launch.lat"
  sleep 0.5
done
job=$(median <"$TMP/job.lat"); open=$(median <"$TMP/open.lat"); launch=$(median <"$TMP/launch.lat")
need job open launch
sandbox=$(awk -v a="$job" -v b="$open" 'BEGIN { printf "%.4f", a - b }')
container=""
if [ -n "$IMAGE" ]; then container=$(median <"$TMP/image.lat"); fi
read -r q o p <<<"$(awk '{ q += $1; o += $2; p += $3 } END { printf "%.3f %.3f %.3f", q / NR, o / NR, p / NR }' "$TMP/phases")"
printf "  %-58s %8.3f s\n" "anneal submit -> first rank instruction (job, sandboxed)" "$job"
printf "  %-58s %8.3f s\n" "  the same job with sandbox: false" "$open"
printf "  %-58s %8.3f s\n" "  the sandbox's own cost (the difference)" "$sandbox"
if [ -n "$container" ]; then
  printf "  %-58s %8.3f s\n" "  the same job in a container (image:, podman)" "$container"
else
  echo "  (no container start: podman is not installed, or this is not root)"
fi
printf "  %-58s %8.3f s\n" "anneal launch -> first rank instruction (peer)" "$launch"
printf "  %-58s %8.3f s\n" "  of the job's: queued (Pending -> Starting, mean)" "$q"
printf "  %-58s %8.3f s\n" "  obtaining the instance (Starting -> Downloading, mean)" "$o"
printf "  %-58s %8.3f s\n" "  agent: package, channels, ports (Downloading -> Training)" "$p"
ratio=$(echo "$job / $launch" | bc -l | cut -c1-5); need q o p ratio
echo "RESULT job_start_s=$job job_unsandboxed_start_s=$open sandbox_start_s=$sandbox${container:+ job_container_start_s=$container} launch_start_s=$launch ratio=$ratio"

write_config <<YAML
model: {vocab_size: 50257, max_seq_len: $T, $MODEL}
data: {dir: $DATA, seq_len: $T, batch_size: $B, seed: 1}
train: {steps: $STEPS, log_every: 1, eval_every: 0, eval_batches: 1, resume: none}
YAML
install -m 644 "$cfg" "$TMP/train.yaml"  # mktemp made it 0600: the job uid reads it
cat >"$TMP/train_job.yaml" <<YAML
name: overhead
entrypoint: {command: [anneal, train, --config, $TMP/train.yaml]}
YAML
# mean_step: the mean ms of steps FROM..STEPS in the trainer's lines on standard input (nothing if none)
mean_step() {
  sed -n "s/.*step \+\([0-9]\+\)\/$STEPS .* | \([0-9]*\) ms | .*/\1 \2/p" |
    awk -v from=$FROM '$1 >= from { s += $2; n++ } END { if (n) printf "%.2f", s / n }'
}
echo "agent overhead on a training step (mean ms of steps $FROM-$STEPS):"
a=(); b=()
for round in $(seq 1 $ROUNDS); do
  a+=("$(OMP_NUM_THREADS=2 "$ANNEAL" launch --nproc-per-node 1 -- "$ANNEAL" train --config "$TMP/train.yaml" 2>&1 | mean_step)")
  id=$(OMP_NUM_THREADS=2 "$ANNEAL" submit "$TMP/train_job.yaml" --server "$URL" --wait --quiet 2>/dev/null)
  b+=("$("$ANNEAL" logs "$id" --server "$URL" --rank 0 | sed 's/^\[rank 0\] //' | mean_step)")
  need "a[-1]" "b[-1]"
  echo "  round $round: anneal launch ${a[-1]} ms, as a job ${b[-1]} ms"
done
ma=$(printf '%s\n' "${a[@]}" | awk '{ s += $1 } END { printf "%.2f", s / NR }')
mb=$(printf '%s\n' "${b[@]}" | awk '{ s += $1 } END { printf "%.2f", s / NR }')
printf "  %-58s %8s ms\n" "anneal launch (peer)" "$ma" "as a job under the agent" "$mb"
pct=$(echo "($mb - $ma) * 100 / $ma" | bc -l | cut -c1-6); need pct
echo "RESULT step_ms_launch=$ma step_ms_job=$mb overhead_pct=$pct"

multi_start "$ANNEAL" "${2:-${JOB_LATENCY_BEFORE:-}}"
