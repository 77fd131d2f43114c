#!/usr/bin/env bash
# peers.slurm: `anneal server --backend slurm` on a real Slurm 22.05 cluster of two virtual nodes, n1
# and n2, 1 CPU each (scripts/start_slurm.sh: munged, slurmctld, two slurmd on loopback), started once
# for every check here:
#   1. bad input: no sbatch on PATH, no controller answering, anneal missing on the nodes -> the server
#      refuses to start (exit 2) naming the fix; a job asking more nodes than the partition has -> 400
#      naming resources.instance_count and the partition's size;
#   2. a 2-instance built-in-trainer job: one agent on each node, in one Slurm allocation, rendezvous
#      across them, Completed with the final state hash of the same job on the local backend; the
#      ranks see SLURM_JOB_ID and SLURMD_NODENAME, and not the agents' SLURM_PROCID;
#   3. a second job waits in Slurm's queue while the first holds both nodes, Slurm's reason shown by
#      `anneal describe`, and starts when the first ends;
#   4. n2 set DOWN mid-run -> the allocation fails (NODE_FAIL) -> an infrastructure failure -> a new
#      allocation pending with Slurm's reason -> n2 RESUMEd -> Completed with the same state hash;
#   5. `anneal stop` leaves nothing in squeue and no agent process; the server SIGKILLed and restarted
#      mid-job finds its allocation again and the job completes;
#   6. pre-emption (`scancel --signal=TERM`: SIGTERM to the job's steps, as Slurm's time-limit warning
#      sbatch --signal=TERM@GRACE sends it): the ranks checkpoint, the job goes Interrupted and
#      resumes as a new attempt from that checkpoint (even with retry.max_attempts 1: an interruption is
#      no failure), steps re-done at most one checkpoint interval, Completed with the same state hash;
#   7. entrypoint.launcher mpirun (Open MPI's allreduce) and srun (a non-MPI program) each span n1
#      and n2, every rank with the rank contract; a failing rank under srun is named in the reason;
#   8. the job sandbox on the nodes: a probe job on one node is denied (by errno) the store, the
#      tokens, the agents' folders and a victim job's files, environment and process on the other;
#      an image: job runs in a podman container on a node of its allocation.
source "$(dirname "$0")/../e2e/lib.sh"
source "$(dirname "$0")/../e2e/sandbox_probe.sh"
cd "$(dirname "$0")/../.."
export OMP_NUM_THREADS=1
PY=/usr/bin/python3
SERVER=""
cleanup() {
  [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null
  bash scripts/start_slurm.sh --stop "$TMP/slurm"
  pkill -f -- "--work-dir $TMP/" 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT
t0=$(date +%s.%N)
env_line=$(bash scripts/start_slurm.sh "$TMP/slurm") || { bad "Slurm started"; finish; exit 1; }
eval "$env_line"
echo "Slurm up in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }') s: $(sinfo -h -o '%P %D %t' | tr '\n' ' ')"

# ---- 1. bad input ----
expect_exit "no sbatch on PATH: the server refuses to start (exit 2), naming the fix" 2 "sbatch is not on the server's PATH" \
  env PATH=/nonexistent "$ANNEAL" server --data-dir "$TMP/bad1" --listen 127.0.0.1:0 --backend slurm
# (MessageTimeout 2: sinfo gives up after ~1 s instead of ~9)
sed -e "s/^SlurmctldPort=.*/SlurmctldPort=$(scripts/free_port.sh)/" -e '$a MessageTimeout=2' "$SLURM_CONF" >"$TMP/dead.conf"
expect_exit "no controller answering: refused, naming the fix" 2 "no Slurm controller answered.*start slurmctld" \
  env SLURM_CONF="$TMP/dead.conf" "$ANNEAL" server --data-dir "$TMP/bad2" --listen 127.0.0.1:0 --backend slurm
expect_exit "anneal missing on the nodes: refused, naming --slurm-agent-binary" 2 "does not run on the cluster's nodes.*--slurm-agent-binary" \
  "$ANNEAL" server --data-dir "$TMP/bad3" --listen 127.0.0.1:0 --backend slurm --slurm-agent-binary /nonexistent/anneal
expect_exit "an unknown partition: refused, naming it" 2 "no partition 'gpu'" \
  "$ANNEAL" server --data-dir "$TMP/bad4" --listen 127.0.0.1:0 --backend slurm --slurm-partition gpu

start_server() {  # the server on the Slurm cluster; sets SERVER and URL
  "$ANNEAL" server --data-dir "$TMP/srv" --listen "127.0.0.1:${1:-0}" --backend slurm --heartbeat-s 0.2 \
    --heartbeat-timeout-s 10 >>"$TMP/server.log" 2>&1 &
  SERVER=$!
  for _ in $(seq 1 150); do [ -s "$TMP/srv/server.json" ] && curl -s "$(url)/v1/health" >/dev/null && break; sleep 0.1; done
  URL=$(url)
}
url() { $PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$TMP/srv/server.json" 2>/dev/null; }
rm -f "$TMP/srv/server.json"
start_server
export ANNEAL_TOKEN_FILE="$TMP/srv/admin.token"
CURL=(curl -s --max-time 30 -H "Authorization: Bearer $(cat "$TMP/srv/admin.token")")
field() { "$ANNEAL" describe "$1" --server "$URL" --json | $PY -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$2"; }
wait_field() {  # ID KEY VALUE SECONDS
  for _ in $(seq 1 $(($4 * 10))); do [ "$(field "$1" "$2" 2>/dev/null)" = "$3" ] && return 0; sleep 0.1; done
  return 1
}
wait_step() {  # ID STEP
  for _ in $(seq 1 600); do "$ANNEAL" logs "$1" --server "$URL" 2>/dev/null | grep -qE "step +$2/" && return 0; sleep 0.1; done
  return 1
}
hash_of() { sed -nE 's/.*state hash.*: ([0-9a-f]+)$/\1/p' | tail -1; }
code=$("${CURL[@]}" -o "$TMP/body" -w '%{http_code}' --data '{"name":"big","entrypoint":{"command":["true"]},"resources":{"instance_count":3}}' "$URL/v1/jobs")
check "a job asking 3 nodes of a 2-node partition: 400 naming resources.instance_count and the partition's size" \
  $PY -c 'import json,sys; b=json.load(open(sys.argv[2])); e=b["error"]; assert sys.argv[1]=="400" and e["field"]=="resources.instance_count" and "has 2 node(s)" in e["message"], (sys.argv[1], b)' "$code" "$TMP/body"

# ---- 2. the built-in trainer on both nodes, against the local backend ----
"$ANNEAL" prep --input data/kjv --output "$TMP/ds" --val-fraction 0.05 --unit-mb 1 --quiet >/dev/null
mkdir -p "$TMP/src"
job_config "$TMP/ds" 120 10 >"$TMP/src/cfg.yaml"
job_yaml() {  # NAME CHECKPOINT_DIR: the 2-instance training job
  cat >"$TMP/$1.yaml" <<YAML
name: $1
entrypoint:
  command: 'echo "env: RANK=\$RANK SLURM_JOB_ID=\${SLURM_JOB_ID:-} SLURMD_NODENAME=\${SLURMD_NODENAME:-} SLURM_PROCID=\${SLURM_PROCID:-unset}"; exec anneal train --config cfg.yaml --set train.checkpoint_dir=\$ANNEAL_CHECKPOINT_URI'
source: src
checkpoint: {uri: "file://$2", sync: false}
resources: {instance_count: 2, procs_per_instance: 1}
retry: {max_attempts: 3}
environment: {OMP_NUM_THREADS: "1"}
YAML
}
job_yaml ref "$TMP/ck_ref"
ANNEAL_TOKEN_FILE= PATH="$(dirname "$ANNEAL"):$PATH" "$ANNEAL" submit "$TMP/ref.yaml" --local >"$TMP/ref.out" 2>&1
ref_hash=$(hash_of <"$TMP/ref.out")
check "the same job on the local backend completes (state hash $ref_hash)" test -n "$ref_hash"
[ -n "$ref_hash" ] || { echo "  the local run's last lines:"; tail -15 "$TMP/ref.out" | sed 's/^/    /'; }
job_yaml two "$TMP/ck_two"
id=$("$ANNEAL" submit "$TMP/two.yaml" --server "$URL")
check "the 2-instance job completes on Slurm" wait_field "$id" status Completed 120
"$ANNEAL" logs "$id" --server "$URL" >"$TMP/two.logs"
"$ANNEAL" describe "$id" --server "$URL" --json >"$TMP/two.json"
check "... one rank on each node (SLURMD_NODENAME n1 and n2)" \
  test "$(grep -oE 'env: RANK=[01] SLURM_JOB_ID=[0-9]+ SLURMD_NODENAME=n[12]' "$TMP/two.logs" | sed 's/SLURM_JOB_ID=[0-9]* //' | sort | tr '\n' ' ')" = \
  "env: RANK=0 SLURMD_NODENAME=n1 env: RANK=1 SLURMD_NODENAME=n2 "
check "... in one Slurm allocation, its id visible to the ranks" \
  test "$(grep -oE 'SLURM_JOB_ID=[0-9]+' "$TMP/two.logs" | sort -u | wc -l)" -eq 1
check "... the agents' SLURM_PROCID hidden from the ranks" test "$(grep -c 'SLURM_PROCID=unset' "$TMP/two.logs")" -eq 2
check "... the ranks rendezvoused across the nodes" grep -q "parallel: 2 ranks" "$TMP/two.logs"
two_hash=$(hash_of <"$TMP/two.logs")
check "... with the local backend's final state hash ($two_hash)" test "$two_hash" = "$ref_hash"
check "... and nothing left in squeue" bash -c 'for _ in $(seq 1 100); do [ -z "$(squeue -h)" ] && exit 0; sleep 0.1; done; exit 1'

# ---- 3. a second job waits in Slurm's queue ----
cat >"$TMP/hold.yaml" <<'YAML'
name: hold
entrypoint: {command: 'sleep 6'}
resources: {instance_count: 2}
YAML
hold=$("$ANNEAL" submit "$TMP/hold.yaml" --server "$URL")
check "a job holding both nodes starts" wait_field "$hold" secondary_status Training 60
sed 's/^name: hold/name: after/' "$TMP/hold.yaml" >"$TMP/after.yaml"
after=$("$ANNEAL" submit "$TMP/after.yaml" --server "$URL")
wait_reason() {
  for _ in $(seq 1 100); do field "$after" pending_reason 2>/dev/null | grep -qE "Slurm job [0-9]+ pending: (Resources|Priority)" && return 0; sleep 0.1; done
  return 1
}
check "a second job waits with Slurm's reason in describe" wait_reason
echo "  pending_reason: $(field "$after" pending_reason)"
check "... and completes after the first" wait_field "$after" status Completed 90
check "... which had completed first" test "$(field "$hold" status)" = Completed

# ---- 4. a node DOWN mid-run ----
job_yaml down "$TMP/ck_down"
id=$("$ANNEAL" submit "$TMP/down.yaml" --server "$URL")
check "node failure: the job reaches step 30" wait_step "$id" 30
scontrol update NodeName=n2 State=DOWN Reason=anneal-test
check "... n2 DOWN: the job restarts, its new allocation pending with Slurm's reason" \
  bash -c "for _ in \$(seq 1 300); do '$ANNEAL' describe '$id' --server '$URL' --json | grep -qE 'Slurm job [0-9]+ pending: (ReqNodeNotAvail|Nodes required|Resources)' && exit 0; sleep 0.1; done; exit 1"
scontrol update NodeName=n2 State=RESUME
check "... n2 RESUMEd: the job completes" wait_field "$id" status Completed 120
"$ANNEAL" describe "$id" --server "$URL" --json >"$TMP/down.json"
check "... through an infrastructure failure of attempt 0 (the allocation ended NODE_FAIL), not an interruption" \
  bash -c "grep -q 'attempt 0 failed (infrastructure' '$TMP/down.json' && ! grep -q Interrupted '$TMP/down.json'"
$PY -c 'import json,sys; [print("  %.2f %-12s %s" % (h["at"], h["secondary_status"], h["message"].splitlines()[0][:150])) for h in json.load(open(sys.argv[1]))["history"]]' "$TMP/down.json"
"$ANNEAL" logs "$id" --server "$URL" >"$TMP/down.logs"
check "... resumed from a checkpoint" grep -q 'resumed from' "$TMP/down.logs"
check "... with the same final state hash" test "$(hash_of <"$TMP/down.logs")" = "$ref_hash"

# ---- 5. stop, and a server restart mid-job ----
cat >"$TMP/long.yaml" <<'YAML'
name: long
entrypoint: {command: 'sleep 300'}
resources: {instance_count: 2}
YAML
id=$("$ANNEAL" submit "$TMP/long.yaml" --server "$URL")
check "a long job starts" wait_field "$id" secondary_status Training 60
"$ANNEAL" stop "$id" --server "$URL" >/dev/null
check "stop: the job ends Stopped" wait_field "$id" status Stopped 60
gone() { for _ in $(seq 1 300); do [ -z "$(squeue -h)" ] && ! pgrep -f -- "--work-dir $TMP/srv-work/" >/dev/null && return 0; sleep 0.1; done; return 1; }
check "... leaving nothing in squeue and no agent process" gone
job_yaml restart "$TMP/ck_restart"
id=$("$ANNEAL" submit "$TMP/restart.yaml" --server "$URL")
check "restart: the job reaches step 30" wait_step "$id" 30
port=${URL##*:}
kill -9 "$SERVER"; wait "$SERVER" 2>/dev/null
start_server "$port"
check "... the server killed and restarted: the job completes" wait_field "$id" status Completed 120
check "... on its first allocation (no retry)" test "$(field "$id" attempt)" = 0
"$ANNEAL" logs "$id" --server "$URL" >"$TMP/restart.logs"
check "... with the same final state hash" test "$(hash_of <"$TMP/restart.logs")" = "$ref_hash"
check "... and nothing left in squeue" bash -c 'for _ in $(seq 1 100); do [ -z "$(squeue -h)" ] && exit 0; sleep 0.1; done; exit 1'

# ---- 6. pre-emption ----
job_yaml preempt "$TMP/ck_preempt"
sed -i 's/max_attempts: 3/max_attempts: 1/' "$TMP/preempt.yaml"
id=$("$ANNEAL" submit "$TMP/preempt.yaml" --server "$URL")
check "pre-emption: the job reaches step 30" wait_step "$id" 30
slurm_id=$(squeue -h -o %i | head -1)
scancel --signal=TERM "$slurm_id"
check "... Slurm's SIGTERM to allocation $slurm_id: the job completes" wait_field "$id" status Completed 120
"$ANNEAL" describe "$id" --server "$URL" --json >"$TMP/preempt.json"
$PY -c 'import json,sys; [print("  %.2f %-12s %s" % (h["at"], h["secondary_status"], h["message"].splitlines()[0][:150])) for h in json.load(open(sys.argv[1]))["history"]]' "$TMP/preempt.json"
check "... through Interrupted, then resumed as attempt 1 with retry.max_attempts 1" \
  $PY -c 'import json,sys; j=json.load(open(sys.argv[1])); s=[h["secondary_status"] for h in j["history"]]; assert "Interrupted" in s and s.index("Interrupted") < s.index("Restarting") and j["attempt"] == 1, (s, j["attempt"])' "$TMP/preempt.json"
"$ANNEAL" logs "$id" --server "$URL" >"$TMP/preempt.logs"
check "... the ranks saved a checkpoint on SIGTERM" grep -q 'stop requested: saving a checkpoint' "$TMP/preempt.logs"
stopped_at=$(awk '/\[rank 0\] step +[0-9]+\// { match($0, /step +[0-9]+/); n = substr($0, RSTART + 5) + 0 } /stop requested: saving a checkpoint/ { print n; exit }' "$TMP/preempt.logs")
resumed_at=$(grep -oE 'resumed from .* at step [0-9]+' "$TMP/preempt.logs" | tail -1 | grep -oE '[0-9]+$')
check "... resumed at step $resumed_at after stopping at step $stopped_at: at most one checkpoint interval (10) re-done" \
  test -n "$resumed_at" -a -n "$stopped_at" -a "$((stopped_at - resumed_at))" -le 10 -a "$resumed_at" -le "$stopped_at"
check "... with the same final state hash" test "$(hash_of <"$TMP/preempt.logs")" = "$ref_hash"

# ---- 7. MPI and srun programs spanning both nodes ----
# mpirun (on n1, in the agents' allocation) starts its daemons with srun --overlap; srun starts the
# ranks itself. Each rank prints the rank contract and its Slurm node.
show='echo "contract RANK=$RANK WORLD=$WORLD_SIZE GROUP=$GROUP_RANK node=$SLURMD_NODENAME procid=${SLURM_PROCID:-unset}"'
span_job() {  # NAME LAUNCHER COMMAND -> the job's id
  printf 'name: %s\nentrypoint:\n  launcher: %s\n  command: %s\nresources: {instance_count: 2}\n' "$1" "$2" "$3" >"$TMP/$1.yaml"
  "$ANNEAL" submit "$TMP/$1.yaml" --server "$URL"
}
id=$(span_job mpi mpirun "'$show; $(dirname "$ANNEAL")/../bench/allreduce_mpi 1048576 1 3'")
check "launcher mpirun: an Open MPI program across n1 and n2 completes" wait_field "$id" status Completed 90
"$ANNEAL" logs "$id" --server "$URL" >"$TMP/mpi.logs"
check "... rank 0 on n1 and rank 1 on n2, with the contract (not the daemons' SLURM_PROCID)" \
  bash -c "grep -q '^\[rank 0\] contract RANK=0 WORLD=2 GROUP=0 node=n1 procid=unset' '$TMP/mpi.logs' &&
    grep -q '^\[rank 1\] contract RANK=1 WORLD=2 GROUP=1 node=n2 procid=unset' '$TMP/mpi.logs'"
check "... MPI_Allreduce ran across them (rank 0's 1 MiB line)" grep -qE '^\[rank 0\] 1048576 ' "$TMP/mpi.logs"
id=$(span_job srun srun "'$show'")
check "launcher srun: a non-MPI program across n1 and n2 completes" wait_field "$id" status Completed 90
"$ANNEAL" logs "$id" --server "$URL" >"$TMP/srun.logs"
check "... rank 0 on n1 and rank 1 on n2, SLURM_PROCID its rank" \
  bash -c "grep -q '^\[rank 0\] contract RANK=0 WORLD=2 GROUP=0 node=n1 procid=0' '$TMP/srun.logs' &&
    grep -q '^\[rank 1\] contract RANK=1 WORLD=2 GROUP=1 node=n2 procid=1' '$TMP/srun.logs'"
id=$(span_job srunfail srun "'if [ \"\$RANK\" = 1 ]; then echo giving up >&2; exit 3; fi; sleep 60'")
check "launcher srun: rank 1 exiting 3 fails the job" wait_field "$id" status Failed 90
reason=$(field "$id" failure_reason)
# On a failure the check's own line carries the reason (a CI log keeps only its failing lines) and the
# job's lines from srun follow (this check failed once in CI and never here: 6 of 6 under stress-ng).
check "... its reason names rank 1 (from srun's report) and rank 1's last line$(grep -q "rank 1 failed first (srun" <<<"$reason" && grep -q "giving up" <<<"$reason" || echo " [reason: $(tr '\n' '|' <<<"$reason" | head -c 400)]")" \
  bash -c 'grep -q "rank 1 failed first (srun" <<<"$1" && grep -q "giving up" <<<"$1"' _ "$reason" ||
  "$ANNEAL" logs "$id" --server "$URL" | grep -v '^\[rank 0\] step' | tail -15 | sed 's/^/  log: /'
check "... and nothing left in squeue" bash -c 'for _ in $(seq 1 100); do [ -z "$(squeue -h)" ] && exit 0; sleep 0.1; done; exit 1'

# ---- 8. the job sandbox on Slurm's nodes (tests/e2e/sandbox_probe.sh, as e2e.job_sandbox) ----
# The victim holds one node, the probe the other (both virtual nodes are this host): every attempt to
# reach the store, the tokens, the agents and the victim is denied, by its errno.
SRV=$TMP/srv
start_victim ""
make_suid_tool
probe_spec probe true >"$TMP/probe.yaml"
pid=$("$ANNEAL" submit "$TMP/probe.yaml" --server "$URL")
check "the probe job completes on the other node" wait_field "$pid" status Completed 90
"$ANNEAL" logs "$pid" --server "$URL" | sed -E 's/^\S+ //' >"$TMP/probe.out"
assert_denials "$TMP/probe.out"
"$ANNEAL" stop "$vid" --server "$URL" >/dev/null 2>&1
check "the victim stops" wait_field "$vid" status Stopped 60
# image: inside the allocation, podman run on the node (an image imported from a local tar)
if command -v podman >/dev/null; then
  import_host_image anneal-peers/mini:1 /bin/sh /usr/bin/id /bin/ls
  printf 'name: ctr
image: anneal-peers/mini:1
entrypoint: {command: %s}
' \
    "'ls /usr/bin/python3 >/dev/null 2>&1 && echo tree: host || echo tree: image; echo \"uid \$(id -u) node \$SLURMD_NODENAME\"'" >"$TMP/ctr.yaml"
  cid=$("$ANNEAL" submit "$TMP/ctr.yaml" --server "$URL")
  check "image: a job in a container on a Slurm node completes" wait_field "$cid" status Completed 60
  check "... in the image's tree, as a job uid, on a node of the allocation" \
    bash -c "'$ANNEAL' logs '$cid' --server '$URL' | grep -q 'tree: image' && '$ANNEAL' logs '$cid' --server '$URL' | grep -qE 'uid 20[0-9]{8} node n[12]'"
  podman rmi -f anneal-peers/mini:1 >/dev/null 2>&1
else
  skip_part "image: on Slurm: podman is not installed (scripts/setup.sh installs it)"
fi
finish
