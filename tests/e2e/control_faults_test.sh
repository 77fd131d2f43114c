#!/usr/bin/env bash
# Job policies against real faults on the local backend (a server, agents and ranks as processes):
#   1. a rank SIGKILLed mid-run -> Restarting -> Completed on a fresh instance, final state hash equal
#      to an uninterrupted run's (resume from the newest complete checkpoint);
#   2. an agent SIGKILLed -> its heartbeat is lost -> the instance is replaced and the job completes;
#   3. a rank frozen with SIGSTOP -> the hang is detected within stopping.hang_timeout_s -> restarted;
#   4. max_runtime_s -> MaxRuntimeExceeded, with the checkpoint saved on SIGTERM;
#   5. a user error -> Failed at once (no retry), the failing rank and its last lines in the reason;
#   6. max_pending_s -> Stopped while waiting for instances;
#   7. anneal stop --requeue -> Interrupted -> resumed as a new attempt -> the same final state hash.
source "$(dirname "$0")/lib.sh"
export OMP_NUM_THREADS=1
PY=/usr/bin/python3
"$ANNEAL" prep --input data/kjv --output "$TMP/ds" --val-fraction 0.05 --unit-mb 1 --quiet >/dev/null
mkdir -p "$TMP/src"
job_config "$TMP/ds" 40 5 >"$TMP/src/cfg.yaml"
"$ANNEAL" train --config "$TMP/src/cfg.yaml" --set train.checkpoint_dir="$TMP/ref_ckpt" >"$TMP/ref.log" 2>&1
ref_hash=$(sed -nE 's/.*state hash.*: ([0-9a-f]+)/\1/p' "$TMP/ref.log")
check "the uninterrupted reference run finished" test -n "$ref_hash"

HB_S=0.2 HB_TIMEOUT_S=3 HANG_S=4  # the timings this test configures; part 3's bound is derived from them
"$ANNEAL" server --data-dir "$TMP/srv" --listen 127.0.0.1:0 --max-instances 2 --heartbeat-s $HB_S \
  --heartbeat-timeout-s $HB_TIMEOUT_S >"$TMP/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null; pkill -f "$TMP/srv-work" 2>/dev/null; rm -rf "$TMP"' EXIT
for _ in $(seq 1 100); do [ -s "$TMP/srv/server.json" ] && break; sleep 0.1; done
URL=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$TMP/srv/server.json")
export ANNEAL_TOKEN_FILE="$TMP/srv/admin.token"  # the admin token the server created
field() { "$ANNEAL" describe "$1" --server "$URL" --json | $PY -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$2"; }
wait_status() {  # ID STATUS SECONDS
  for _ in $(seq 1 $(($3 * 10))); do
    [ "$(field "$1" secondary_status 2>/dev/null)" = "$2" ] && return 0
    sleep 0.1
  done
  return 1
}
wait_step() {  # ID STEP: the job's logs show that step
  for _ in $(seq 1 600); do
    "$ANNEAL" logs "$1" --server "$URL" 2>/dev/null | grep -qE "step +$2/" && return 0
    sleep 0.1
  done
  return 1
}
history() { "$ANNEAL" describe "$1" --server "$URL" --json | $PY -c '
import json, sys
for h in json.load(sys.stdin)["history"]: print("%.3f %s %s" % (h["at"], h["secondary_status"], h["message"].splitlines()[0]))'; }
final_hash() { "$ANNEAL" logs "$1" --server "$URL" | sed -nE 's/.*state hash.*: ([0-9a-f]+)/\1/p' | tail -1; }
# job NAME CKPT EXTRA_YAML [EXTRA_HYPERPARAMETERS]: submits the built-in trainer with 3 attempts
job() {
  cat >"$TMP/$1.yaml" <<YAML
name: $1
entrypoint:
  command: [anneal, train, --config, cfg.yaml]
  hyperparameters: {train.checkpoint_dir: "\${ANNEAL_CHECKPOINT_URI}"${4:+, $4}}
source: src
checkpoint: {uri: "$2", sync: false}
retry: {max_attempts: 3}
environment: {OMP_NUM_THREADS: "1"}
$3
YAML
  "$ANNEAL" submit "$TMP/$1.yaml" --server "$URL"
}

# ---- 1. a rank SIGKILLed ----
id=$(job rankkill "$TMP/ck1" "")
check "rank kill: the job reaches step 12" wait_step "$id" 12
# The rank's own pid (exactly one process trains into ck1), killed by pid, not by a pattern.
rank_pid=$(pgrep -f -- "checkpoint_dir=$TMP/ck1")
check "... one rank process found (pid ${rank_pid//$'\n'/ })" test "$(wc -w <<<"$rank_pid")" -eq 1
t_kill=$(date +%s.%N)
kill -9 "$rank_pid" && echo "  killed rank pid $rank_pid of $id"
check "rank killed: the job completes" wait_status "$id" Completed 90
history "$id" >"$TMP/h1"
check "... through Restarting (infrastructure, attempt 1)" grep -q 'Restarting attempt 0 failed (infrastructure' "$TMP/h1"
check "... and the failure reported is that rank's death by SIGKILL: $(grep -m1 Restarting "$TMP/h1")" \
  grep -qE "Restarting attempt 0 failed \(infrastructure: .*pid $rank_pid\).*SIGKILL" "$TMP/h1"
check "... with final parameters equal to the uninterrupted run's" test "$(final_hash "$id")" = "$ref_hash"
check "... having resumed from a checkpoint" bash -c "'$ANNEAL' logs '$id' --server '$URL' | grep -q 'resumed from'"
t_restart=$(awk '$2 == "Restarting" { print $1 }' "$TMP/h1"); t_train=$(awk '$2 == "Training" { t = $1 } END { print t }' "$TMP/h1")
echo "  detection $(awk -v a="$t_kill" -v b="$t_restart" 'BEGIN { printf "%.2f", b - a }') s, back to Training after $(awk -v a="$t_restart" -v b="$t_train" 'BEGIN { printf "%.2f", b - a }') s"

# ---- 2. an agent SIGKILLed ----
id=$(job agentkill "$TMP/ck2" "")
check "agent kill: the job reaches step 12" wait_step "$id" 12
agent_pid=$(pgrep -f -- "--instance-id $id-a0-n0( |$)")
check "... one agent process found (pid ${agent_pid//$'\n'/ })" test "$(wc -w <<<"$agent_pid")" -eq 1
t_kill=$(date +%s.%N)
kill -9 "$agent_pid" && echo "  killed agent pid $agent_pid of $id"
check "agent killed: the job completes" wait_status "$id" Completed 90
history "$id" >"$TMP/h2"
check "... after its lost heartbeat" grep -q 'Restarting attempt 0 failed (infrastructure: instance .* lost: no heartbeat' "$TMP/h2"
check "... on a replacement instance" grep -q "Starting attempt 1: obtaining 1 instance(s) from the local backend: $id-a1-n0" "$TMP/h2"
check "... with final parameters equal to the uninterrupted run's" test "$(final_hash "$id")" = "$ref_hash"
echo "  detection $(awk -v a="$t_kill" -v b="$(awk '$2 == "Restarting" { print $1 }' "$TMP/h2")" 'BEGIN { printf "%.2f", b - a }') s (heartbeat timeout $HB_TIMEOUT_S s)"

# ---- 3. a rank frozen with SIGSTOP ----
id=$(job frozen "$TMP/ck3" "stopping: {hang_timeout_s: $HANG_S, hang_startup_s: 60}")
check "frozen rank: the job reaches step 12" wait_step "$id" 12
frozen_pid=$(pgrep -f -- "checkpoint_dir=$TMP/ck3")
check "... one rank process found (pid ${frozen_pid//$'\n'/ })" test "$(wc -w <<<"$frozen_pid")" -eq 1
t_stop=$(date +%s.%N)
kill -STOP "$frozen_pid" && echo "  froze rank pid $frozen_pid of $id"
check "frozen rank: the job completes" wait_status "$id" Completed 90
history "$id" >"$TMP/h3"
check "... the hang was detected and restarted" grep -q 'Restarting attempt 0 failed (infrastructure: node 0: hung: no rank printed' "$TMP/h3"
det=$(awk -v a="$t_stop" -v b="$(awk '$2 == "Restarting" { print $1 }' "$TMP/h3")" 'BEGIN { printf "%.2f", b - a }')
# The bound, from the configuration: the rank's quiet time starts at or before the SIGSTOP (its last
# line came before it), so the agent finds it hung at most HANG_S after the freeze plus its check's
# period (CHECK_S: its metrics loop wakes at least once a second, min(1 s, the agent's 5 s
# --metrics-interval-s)); the ranks are killed at once and the agent reports with its next heartbeat
# (at most HB_S; it is woken when the ranks end), whose arrival wakes a scheduler pass (at the latest
# the server's 1 s tick, TICK_S, its default). MARGIN_S, 1 s, covers the kill, the reap and the store's
# write on a loaded machine; the test holds the e2e tier's cpu-heavy lock (tests/CMakeLists.txt), so
# no compile or benchmark of that tier runs beside it.
CHECK_S=1 TICK_S=1 MARGIN_S=1
bound=$(awk -v a=$HANG_S -v b=$CHECK_S -v c=$HB_S -v d=$TICK_S -v e=$MARGIN_S 'BEGIN { print a + b + c + d + e }')
check "... within $bound s of the freeze (hang_timeout_s $HANG_S + check $CHECK_S + heartbeat $HB_S + tick $TICK_S + margin $MARGIN_S): $det s" \
  awk -v d="$det" -v b="$bound" 'BEGIN { exit !(d > 0 && d < b) }'
check "... with final parameters equal to the uninterrupted run's" test "$(final_hash "$id")" = "$ref_hash"

# ---- 4. max_runtime_s ----
id=$(job runtime "$TMP/ck4" "stopping: {max_runtime_s: 4, grace_period_s: 20}" "train.steps: 100000, train.checkpoint_every: 0")
check "max_runtime_s: the job ends MaxRuntimeExceeded" wait_status "$id" MaxRuntimeExceeded 60
check "... with primary status Stopped" test "$(field "$id" status)" = Stopped
check "... after saving a checkpoint" bash -c "'$ANNEAL' ckpt ls '$TMP/ck4' | grep -q step-"

# ---- 5. a user error fails fast ----
cat >"$TMP/usererr.yaml" <<'YAML'
name: usererr
entrypoint: {command: 'echo "loading the data"; echo "KeyError: no such column" >&2; exit 1'}
retry: {max_attempts: 3}
YAML
id=$("$ANNEAL" submit "$TMP/usererr.yaml" --server "$URL")
check "user error: Failed" wait_status "$id" Failed 30
reason=$(field "$id" failure_reason)
check "... as a user error" grep -q '^user_error: ' <<<"$reason"
check "... naming the rank" grep -q 'rank 0' <<<"$reason"
check "... with its last lines" grep -q 'KeyError: no such column' <<<"$reason"
history "$id" >"$TMP/h5"
check "... not retried" bash -c "! grep -q Restarting '$TMP/h5'"
check "... exactly one attempt" test "$(field "$id" attempt)" = 0

# ---- 6. max_pending_s ----
cat >"$TMP/hold.yaml" <<'YAML'
name: hold
entrypoint: {command: 'sleep 5'}
resources: {instance_count: 2}
YAML
cat >"$TMP/waiter.yaml" <<'YAML'
name: waiter
entrypoint: {command: 'true'}
stopping: {max_pending_s: 2}
YAML
hold=$("$ANNEAL" submit "$TMP/hold.yaml" --server "$URL")
id=$("$ANNEAL" submit "$TMP/waiter.yaml" --server "$URL")
check "max_pending_s: a job that waits too long is Stopped" wait_status "$id" Stopped 20
history "$id" >"$TMP/h6"
check "... saying why" grep -q 'max_pending_s 2 reached' "$TMP/h6"
wait_status "$hold" Completed 30 >/dev/null

# ---- 7. anneal stop --requeue: interrupted, resumed from the checkpoint its ranks saved ----
id=$(job requeue "$TMP/ck7" "")
check "requeue: the job reaches step 12" wait_step "$id" 12
"$ANNEAL" stop "$id" --requeue --server "$URL" >/dev/null
check "requeue: the job completes" wait_status "$id" Completed 90
history "$id" >"$TMP/h7"
check "... through Interrupted, resumed as attempt 1" \
  bash -c "grep -q 'Interrupted attempt 0 interrupted: requeued by request' '$TMP/h7' && grep -q 'Restarting resuming as attempt 1' '$TMP/h7'"
check "... with final parameters equal to the uninterrupted run's" test "$(final_hash "$id")" = "$ref_hash"
expect_exit "a requeue of a job that is not running is refused (409: exit 2)" 2 "nothing to interrupt" \
  "$ANNEAL" stop "$id" --requeue --server "$URL"

# The server SIGKILLed mid-job, then the job's agent told to stop (SIGTERM): its reports give the
# gone server 10 s once it is stopping, where each used to retry for the whole orphan timeout (600 s).
cat >"$TMP/sleeper.yaml" <<'YAML'
name: sleeper
entrypoint: {command: ["sleep", "300"]}
YAML
id=$("$ANNEAL" submit "$TMP/sleeper.yaml" --server "$URL")
check "a sleeper job is Training" wait_status "$id" Training 30
agent=$(pgrep -P "$SERVER" -f "anneal agent" | head -1)
check "its agent is the server's child" test -n "$agent"
kill -9 "$SERVER"; wait "$SERVER" 2>/dev/null
kill "$agent"
gone=no
for _ in $(seq 1 300); do kill -0 "$agent" 2>/dev/null || { gone=yes; break; }; sleep 0.1; done
check "an agent whose server is gone exits within 30 s of SIGTERM" test "$gone" = yes
finish
