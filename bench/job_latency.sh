#!/usr/bin/env bash
# The control plane's own cost, on the local backend, side by side with `anneal launch` (the same
# launcher without a server, an agent or a package) in this run:
#   1. start latency: from the moment `anneal submit` is invoked to the rank's first instruction (the
#      rank prints its own clock), median of 5 jobs — beside `anneal launch` invoked the same way;
#      the job's history splits it into queueing, obtaining the instance, and the agent's preparation.
#   2. the agent's overhead on a training step: the built-in trainer (L=2, C=128, T=128, B=8) run by
#      `anneal launch` and as a job (the agent shipping its logs, step times and system metrics every
#      second), alternating A B A B A B; mean step time of steps 6-40 from the trainer's own lines.
# Targets (issue 8): start under 1 s; agent overhead under 1 %.
set -euo pipefail
source "$(dirname "$0")/train_lib.sh"
ANNEAL=$(readlink -f "$ANNEAL")
DATA=$(readlink -f "$DATA")
PY=/usr/bin/python3
TMP=$(mktemp -d /tmp/anneal_job_latency.XXXXXX)
"$ANNEAL" server --data-dir "$TMP/srv" --listen 127.0.0.1:0 --max-instances 1 >"$TMP/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null; rm -rf "$TMP" "$cfg"' EXIT
for _ in $(seq 1 100); do [ -s "$TMP/srv/server.json" ] && break; sleep 0.1; done
URL=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$TMP/srv/server.json")
export ANNEAL_TOKEN_FILE="$TMP/srv/admin.token"  # the admin token the server created

cat >"$TMP/hello.yaml" <<'YAML'
name: hello
entrypoint: {command: 'date +%s.%N'}
YAML
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo "start latency (median of 5):"
: >"$TMP/job.lat"; : >"$TMP/launch.lat"; : >"$TMP/phases"
for i in 1 2 3 4 5; do
  t0=$(date +%s.%N)
  id=$("$ANNEAL" submit "$TMP/hello.yaml" --server "$URL")
  for _ in $(seq 1 600); do
    line=$("$ANNEAL" logs "$id" --server "$URL" --rank 0 | head -1)
    [ -n "$line" ] && break
    sleep 0.02
  done
  awk -v a="$t0" -v b="${line##* }" 'BEGIN { printf "%.4f\n", b - a }' >>"$TMP/job.lat"
  "$ANNEAL" describe "$id" --server "$URL" --json | $PY -c '
import json, sys
j = json.load(sys.stdin); h = {x["secondary_status"]: x["at"] for x in j["history"]}
print("%.4f %.4f %.4f" % (h["Starting"] - h["Pending"], h["Downloading"] - h["Starting"], h["Training"] - h["Downloading"]))' >>"$TMP/phases"
  t0=$(date +%s.%N)
  t1=$("$ANNEAL" launch --nproc-per-node 1 -- sh -c 'date +%s.%N' 2>/dev/null | tail -1)
  awk -v a="$t0" -v b="${t1##* }" 'BEGIN { printf "%.4f\n", b - a }' >>"$TMP/launch.lat"
  sleep 0.5
done
job=$(median <"$TMP/job.lat"); launch=$(median <"$TMP/launch.lat")
read -r q o p <<<"$(awk '{ q += $1; o += $2; p += $3 } END { printf "%.3f %.3f %.3f", q / NR, o / NR, p / NR }' "$TMP/phases")"
printf "  %-58s %8.3f s\n" "anneal submit -> first rank instruction (job)" "$job"
printf "  %-58s %8.3f s\n" "anneal launch -> first rank instruction (peer)" "$launch"
printf "  %-58s %8.3f s\n" "  of the job's: queued (Pending -> Starting, mean)" "$q"
printf "  %-58s %8.3f s\n" "  obtaining the instance (Starting -> Downloading, mean)" "$o"
printf "  %-58s %8.3f s\n" "  agent: package, channels, ports (Downloading -> Training)" "$p"
echo "RESULT job_start_s=$job launch_start_s=$launch ratio=$(echo "$job / $launch" | bc -l | cut -c1-5)"

write_config <<YAML
model: {vocab_size: 50257, max_seq_len: 128, n_layer: 2, n_head: 4, n_embd: 128}
data: {dir: $DATA, seq_len: 128, batch_size: 8, seed: 1}
train: {steps: 40, log_every: 1, eval_every: 0, eval_batches: 1, resume: none}
YAML
cp "$cfg" "$TMP/train.yaml"
cat >"$TMP/train_job.yaml" <<YAML
name: overhead
entrypoint: {command: [anneal, train, --config, $TMP/train.yaml]}
YAML
mean_step() { grep -E "step +([6-9]|[1-3][0-9]|40)/40 " | sed -n 's/.* | \([0-9]*\) ms | .*/\1/p' | awk '{ s += $1 } END { printf "%.2f", s / NR }'; }
echo "agent overhead on a training step (mean ms of steps 6-40):"
a=(); b=()
for round in 1 2 3; do
  a+=("$(OMP_NUM_THREADS=2 "$ANNEAL" launch --nproc-per-node 1 -- "$ANNEAL" train --config "$TMP/train.yaml" 2>&1 | mean_step)")
  id=$(OMP_NUM_THREADS=2 "$ANNEAL" submit "$TMP/train_job.yaml" --server "$URL" --wait --quiet 2>/dev/null)
  b+=("$("$ANNEAL" logs "$id" --server "$URL" --rank 0 | sed 's/^\[rank 0\] //' | mean_step)")
  echo "  round $round: anneal launch ${a[-1]} ms, as a job ${b[-1]} ms"
done
ma=$(printf '%s\n' "${a[@]}" | awk '{ s += $1 } END { printf "%.2f", s / NR }')
mb=$(printf '%s\n' "${b[@]}" | awk '{ s += $1 } END { printf "%.2f", s / NR }')
printf "  %-58s %8s ms\n" "anneal launch (peer)" "$ma" "as a job under the agent" "$mb"
echo "RESULT step_ms_launch=$ma step_ms_job=$mb overhead_pct=$(echo "($mb - $ma) * 100 / $ma" | bc -l | cut -c1-6)"
