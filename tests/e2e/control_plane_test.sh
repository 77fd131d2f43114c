#!/usr/bin/env bash
# The control plane end to end on this machine: `anneal server` with the local backend, agents as
# processes, jobs through the CLI and the HTTP API (curl).
#   1. an invalid spec: HTTP 400 naming the field, exit 2 from the CLI; a job that can never fit;
#   2. a 2-instance job with the built-in trainer: completes; logs, metrics (a regex-defined one and
#      per-rank step times) and checkpoints are retrievable;
#   3. the server killed (SIGKILL) and restarted mid-job: the job completes and no log line is lost
#      or doubled (every rank prints numbered lines);
#   4. stop: a long training job ends Stopped within its grace period, with a checkpoint saved;
#   5. MPI programs (entrypoint.launcher mpirun, off Slurm): Open MPI's allreduce across 2 instances,
#      the rank contract on every rank, a failing rank, a stop; srun refused on the local backend;
#   6. 50 jobs submitted at once with capacity for one complete, in submission order.
# (Before 2, the next job's predictable instance ids are pre-registered with the join token: 409.)
source "$(dirname "$0")/lib.sh"
export OMP_NUM_THREADS=1
PY=/usr/bin/python3
CURL=(curl -s --max-time 30)

"$ANNEAL" prep --input data/kjv --output "$TMP/ds" --val-fraction 0.05 --unit-mb 1 --quiet >/dev/null
mkdir -p "$TMP/src"
cat >"$TMP/src/cfg.yaml" <<YAML
model: {vocab_size: 50257, max_seq_len: 32, n_layer: 2, n_head: 2, n_embd: 32}
data: {dir: unset, seq_len: 32, batch_size: 4, seed: 7}
optim: {lr: 3.0e-3, warmup_steps: 5}
train: {steps: 30, log_every: 1, eval_every: 0, eval_batches: 2, checkpoint_every: 10, resume: auto, seed: 99}
YAML

# start_server DIR [ARGS...]: starts a server on a free port; sets SERVER_PID and URL.
start_server() {
  local dir=$1; shift
  "$ANNEAL" server --data-dir "$dir" "$@" >>"$dir.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 1 100); do
    [ -s "$dir/server.json" ] && "${CURL[@]}" "$(json_url "$dir")/v1/health" >/dev/null 2>&1 && break
    sleep 0.1
  done
  URL=$(json_url "$dir")
  # The admin token the server created: the CLI reads ANNEAL_TOKEN_FILE, curl gets the header.
  export ANNEAL_TOKEN_FILE="$dir/admin.token"
  CURL=(curl -s --max-time 30 -H "Authorization: Bearer $(cat "$dir/admin.token")")
}
json_url() { $PY -c 'import json,sys; print(json.load(open(sys.argv[1]+"/server.json"))["url"])' "$1"; }
# field ID KEY: a top-level field of the job's description.
field() { "$ANNEAL" describe "$1" --server "$URL" --json | $PY -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$2"; }
# wait_status ID STATUS SECONDS
wait_status() {
  local now=
  for _ in $(seq 1 $(($3 * 10))); do
    now=$(field "$1" status 2>/dev/null)
    [ "$now" = "$2" ] && return 0
    sleep 0.1
  done
  echo "  job $1 is ${now:-unknown} after $3 s, not $2; reason: $(field "$1" failure_reason 2>/dev/null)" >&2
  return 1
}

start_server "$TMP/srv" --listen 127.0.0.1:0 --max-instances 2 --heartbeat-s 0.2 --heartbeat-timeout-s 20
PORT=${URL##*:}
echo "server at $URL"

# ---- 1. invalid specs ----
cat >"$TMP/bad.yaml" <<'YAML'
name: bad
entrypoint: {command: [true]}
resources: {instance_count: 0}
YAML
expect_exit "a spec with instance_count 0 exits 2 naming the field" 2 "resources.instance_count: must be between 1" \
  "$ANNEAL" submit "$TMP/bad.yaml" --server "$URL"
code=$("${CURL[@]}" -o "$TMP/body" -w '%{http_code}' -H 'Content-Type: application/json' \
  --data '{"name":"bad","entrypoint":{"command":["true"]},"resources":{"instance_count":0}}' "$URL/v1/jobs")
check "the API answers 400 with the field" \
  $PY -c 'import json,sys; b=json.load(open(sys.argv[2])); assert sys.argv[1]=="400" and b["error"]["field"]=="resources.instance_count", (sys.argv[1], b)' "$code" "$TMP/body"
code=$("${CURL[@]}" -o "$TMP/body" -w '%{http_code}' --data '{"name":"bad","entrypoint":{"command":["true"]},"resourcez":{}}' "$URL/v1/jobs")
check "an unknown field is named" grep -q '"field":"resourcez"' "$TMP/body"
code=$("${CURL[@]}" -o "$TMP/body" -w '%{http_code}' --data '{"name":"big","entrypoint":{"command":["true"]},"resources":{"instance_count":3}}' "$URL/v1/jobs")
check "a job larger than the backend can ever hold is refused (400)" test "$code" = 400
check "... saying why" grep -q 'never run at once' "$TMP/body"
expect_exit "a missing job is exit 2" 2 "no job nope-0001" "$ANNEAL" describe nope-0001 --server "$URL"

# ---- 2. two instances, the built-in trainer ----
cat >"$TMP/train2.yaml" <<YAML
name: train2
entrypoint:
  command: [anneal, train, --config, cfg.yaml]
  hyperparameters: {data.dir: "\${ANNEAL_CHANNEL_TRAIN}", train.checkpoint_dir: "\${ANNEAL_CHECKPOINT_URI}"}
source: src
channels: [{name: train, uri: $TMP/ds, mode: file}]
checkpoint: {uri: "file://$TMP/ck_train2", sync: false}
resources: {instance_count: 2, procs_per_instance: 1}
metric_definitions: [{name: train_loss, regex: 'step +[0-9]+/[0-9]+ \| loss ([0-9.]+)'}]
YAML
# The ids of train2's instances are predictable (train2-<seq>-a0-n<node>): pre-registering them with
# the join token is refused (409), so they cannot jam the queue or take the job; train2 still runs.
JOIN=(curl -s --max-time 30 -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $(cat "$TMP/srv/join.token")")
codes=""
for seq in $(seq 1 12); do
  for node in 0 1; do
    codes+="$("${JOIN[@]}" -H 'Content-Type: application/json' \
      -d "{\"id\": \"train2-$(printf %04d "$seq")-a0-n$node\", \"slots\": 1}" "$URL/v1/agents") "
  done
done
check "the join token cannot pre-register a job's predictable instance ids (409, 24 of 24)" \
  test "$(tr ' ' '\n' <<<"$codes" | grep -c '^409$')" = 24
"$ANNEAL" submit "$TMP/train2.yaml" --server "$URL" --wait >"$TMP/train2.out" 2>"$TMP/train2.err"
rc=$?
check "a 2-instance training job completes (exit 0)" test $rc -eq 0
id=$(head -1 "$TMP/train2.out")
check "its history went Pending..Completed" bash -c "grep -q 'Training:' '$TMP/train2.err' && grep -q 'Completed:' '$TMP/train2.err'"
"$ANNEAL" logs "$id" --server "$URL" >"$TMP/train2.logs"
check "logs hold every step of rank 0" test "$(grep -cE '^\[rank 0\] step +[0-9]+/30 ' "$TMP/train2.logs")" -eq 30
check "the ranks saw a world of 2" grep -q "parallel: 2 ranks" "$TMP/train2.logs"
"$ANNEAL" metrics "$id" --server "$URL" --json >"$TMP/train2.metrics"
check "the regex metric has 30 points" \
  $PY -c 'import json,sys; p=json.load(open(sys.argv[1]))["points"]; n=sum(1 for x in p if x["name"]=="train_loss"); assert n==30, n' "$TMP/train2.metrics"
check "step times were reported for both ranks" \
  $PY -c 'import json,sys; p=json.load(open(sys.argv[1]))["points"]; r={x["rank"] for x in p if x["name"]=="step_time_s"}; assert r=={0,1}, r' "$TMP/train2.metrics"
check "system metrics were sampled" grep -q memory_used_mb "$TMP/train2.metrics"
"$ANNEAL" describe "$id" --server "$URL" >"$TMP/train2.describe"
check "describe lists the slowest ranks" grep -q "Slowest ranks" "$TMP/train2.describe"
check "checkpoints are under the checkpoint URI" bash -c "'$ANNEAL' ckpt ls 'file://$TMP/ck_train2' | grep -q 'step-00000030'"
# One meeting at the server for the start (issue 35): the health round's collective met under (attempt
# 0, round 0), and the job's start met there again instead of a meeting of its own.
check "the health round's collective ran across both instances" \
  $PY -c 'import json,sqlite3,sys; rows=sqlite3.connect(sys.argv[1]).execute("SELECT result FROM health_checks WHERE job_id=?", (sys.argv[2],)).fetchall(); c=[x for r in rows for x in json.loads(r[0])["checks"] if x["name"]=="collective"]; assert len(c)==2 and all(x["ok"] and "skipped" not in x for x in c), c' "$TMP/srv/anneal.db" "$id"
check "the collective and the start met once at the server, under attempt 0, round 0" \
  $PY -c 'import sqlite3,sys; rows=sqlite3.connect(sys.argv[1]).execute("SELECT attempt, round FROM meetings WHERE job_id=?", (sys.argv[2],)).fetchall(); assert rows==[(0,0)], rows' "$TMP/srv/anneal.db" "$id"

# ---- 3. the server killed and restarted mid-job ----
cat >"$TMP/lines.yaml" <<'YAML'
name: lines
entrypoint: {command: 'for i in $(seq 1 300); do echo "line $RANK $i"; sleep 0.02; done'}
resources: {instance_count: 2, procs_per_instance: 1}
YAML
id=$("$ANNEAL" submit "$TMP/lines.yaml" --server "$URL")
for _ in $(seq 1 100); do
  [ "$(field "$id" secondary_status)" = Training ] && break
  sleep 0.1
done
sleep 1
kill -9 "$SERVER_PID"
wait "$SERVER_PID" 2>/dev/null
sleep 2
start_server "$TMP/srv" --listen "127.0.0.1:$PORT" --max-instances 2 --heartbeat-s 0.2 --heartbeat-timeout-s 20
check "the job completes after the server's restart" wait_status "$id" Completed 60
"$ANNEAL" logs "$id" --server "$URL" >"$TMP/lines.logs"
for r in 0 1; do
  check "rank $r: all 300 lines, once each, in order" \
    $PY -c 'import sys; r=sys.argv[2]; got=[int(l.split()[-1]) for l in open(sys.argv[1]) if l.startswith("[rank %s] line %s " % (r, r))]; assert got==list(range(1,301)), (len(got), got[:5])' "$TMP/lines.logs" "$r"
done

# ---- 4. stop with a grace period and a final checkpoint ----
cat >"$TMP/long.yaml" <<YAML
name: long
entrypoint:
  command: [anneal, train, --config, cfg.yaml]
  hyperparameters: {data.dir: "\${ANNEAL_CHANNEL_TRAIN}", train.checkpoint_dir: "\${ANNEAL_CHECKPOINT_URI}", train.steps: 100000, train.checkpoint_every: 0}
source: src
channels: [{name: train, uri: $TMP/ds, mode: shared}]
checkpoint: {uri: "$TMP/ck_long", sync: false}
stopping: {grace_period_s: 20}
YAML
id=$("$ANNEAL" submit "$TMP/long.yaml" --server "$URL")
for _ in $(seq 1 300); do
  "$ANNEAL" logs "$id" --server "$URL" 2>/dev/null | grep -qE 'step +5/' && break
  sleep 0.1
done
t0=$(date +%s.%N)
"$ANNEAL" stop "$id" --server "$URL" >/dev/null
check "a stopped job ends Stopped" wait_status "$id" Stopped 40
t1=$(date +%s.%N)
check "... within its grace period (20 s)" awk -v a="$t0" -v b="$t1" 'BEGIN { exit !(b - a < 20) }'
echo "  stop took $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') s"
check "... after saving a checkpoint" bash -c "'$ANNEAL' ckpt ls '$TMP/ck_long' | grep -q 'step-'"
check "... which the logs show" bash -c "'$ANNEAL' logs '$id' --server '$URL' | grep -q 'stop requested: saving a checkpoint'"

# ---- 5. MPI programs as jobs: entrypoint.launcher mpirun, off Slurm ----
# mpirun on instance 0 starts every rank; its daemons on both instances come through the agents'
# launchers (anneal launch-rsh), not sshd. Each rank prints its contract and its instance's folder.
MPI_BENCH=$(dirname "$ANNEAL")/../bench/allreduce_mpi
mpi_job() {  # NAME COUNT PROCS COMMAND -> the job's id
  printf 'name: %s\nentrypoint:\n  launcher: mpirun\n  command: %s\nresources: {instance_count: %s, procs_per_instance: %s}\nstopping: {grace_period_s: 5}\n' \
    "$1" "$4" "$2" "$3" >"$TMP/$1.yaml"
  "$ANNEAL" submit "$TMP/$1.yaml" --server "$URL"
}
no_daemons() { ! pgrep -f "orted.*launch-rsh" >/dev/null && ! pgrep -f "sleep 6[12]" >/dev/null; }
code=$("${CURL[@]}" -o "$TMP/body" -w '%{http_code}' --data '{"name":"s","entrypoint":{"command":["true"],"launcher":"srun"}}' "$URL/v1/jobs")
check "launcher srun on the local backend: 400 naming entrypoint.launcher" \
  $PY -c 'import json,sys; b=json.load(open(sys.argv[2])); assert sys.argv[1]=="400" and b["error"]["field"]=="entrypoint.launcher" and "slurm" in b["error"]["message"], b' "$code" "$TMP/body"
show='echo "contract RANK=$RANK WORLD=$WORLD_SIZE LOCAL=$LOCAL_RANK GROUP=$GROUP_RANK ckpt=$ANNEAL_CHECKPOINT_DIR"'
id=$(mpi_job mpi2 2 1 "'$show; $MPI_BENCH 1048576 1 3'")
check "mpirun across 2 instances: Completed" wait_status "$id" Completed 60
"$ANNEAL" logs "$id" --server "$URL" >"$TMP/mpi2.logs"
for r in 0 1; do
  check "... rank $r has the contract and its own instance's folder (logged as rank $r)" \
    grep -qE "^\[rank $r\] contract RANK=$r WORLD=2 LOCAL=0 GROUP=$r ckpt=.*/$id-a0-n$r/jobs/" "$TMP/mpi2.logs"
done
check "... Open MPI's allreduce ran across them (rank 0's 1 MiB line)" grep -qE '^\[rank 0\] 1048576 ' "$TMP/mpi2.logs"
check "... each instance's daemon was started by its launcher" \
  test "$(grep -c "started mpirun's daemon 1 on node-" "$TMP/mpi2.logs")" -eq 2
check "... and none is left" no_daemons
id=$(mpi_job mpi1 1 2 "'$show'")
check "mpirun with 2 ranks on one instance: Completed" wait_status "$id" Completed 60
"$ANNEAL" logs "$id" --server "$URL" >"$TMP/mpi1.logs"
check "... ranks 0 and 1, local ranks 0 and 1" bash -c "grep -q '^\[rank 0\] contract RANK=0 WORLD=2 LOCAL=0 GROUP=0' '$TMP/mpi1.logs' &&
  grep -q '^\[rank 1\] contract RANK=1 WORLD=2 LOCAL=1 GROUP=0' '$TMP/mpi1.logs'"
id=$(mpi_job mpifail 2 1 "'if [ \"\$RANK\" = 1 ]; then echo giving up >&2; exit 3; fi; sleep 61'")
check "a rank exiting 3 under mpirun: the job Failed" wait_status "$id" Failed 60
reason=$(field "$id" failure_reason)
check "... its reason names rank 1 (from mpirun's report) and rank 1's last line" \
  bash -c 'grep -q "rank 1 failed first (mpirun" <<<"$1" && grep -q "giving up" <<<"$1"' _ "$reason"
check "... the others stopped and no daemon is left" no_daemons
id=$(mpi_job mpistop 2 1 "'echo started; sleep 62'")
for _ in $(seq 1 100); do "$ANNEAL" logs "$id" --server "$URL" 2>/dev/null | grep -q '^\[rank 1\] started' && break; sleep 0.1; done
"$ANNEAL" stop "$id" --server "$URL" >/dev/null
check "anneal stop of an mpirun job: Stopped" wait_status "$id" Stopped 30
check "... no rank or daemon left on either instance" no_daemons
kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null

# ---- 6. 50 jobs, capacity for one, first come first served ----
start_server "$TMP/srv50" --listen 127.0.0.1:0 --max-instances 1 --heartbeat-s 0.2
cat >"$TMP/quick.yaml" <<'YAML'
name: quick
entrypoint: {command: 'echo "$ANNEAL_JOB ran"'}
YAML
ids=()
for i in $(seq 1 50); do ids+=("$("$ANNEAL" submit "$TMP/quick.yaml" --server "$URL")"); done
check "50 jobs accepted" test "${#ids[@]}" -eq 50
check "all 50 complete" wait_status "${ids[49]}" Completed 180
"$ANNEAL" jobs --server "$URL" --limit 100 --json >"$TMP/jobs50.json"
check "every job completed, each started after the previous one ended (submission order)" $PY - "$TMP/jobs50.json" <<'PY'
import json, sys
jobs = sorted(json.load(open(sys.argv[1]))["jobs"], key=lambda j: j["id"])
assert len(jobs) == 50, len(jobs)
assert all(j["status"] == "Completed" for j in jobs), [j["id"] for j in jobs if j["status"] != "Completed"]
for a, b in zip(jobs, jobs[1:]):
    assert a["ended_at"] <= b["started_at"], (a["id"], b["id"])
print("  50 jobs in %.1f s" % (jobs[-1]["ended_at"] - jobs[0]["created_at"]))
PY
kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null
finish
