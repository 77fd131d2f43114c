#!/usr/bin/env bash
# e2e.submit_local: `anneal submit --local` as people use it every day, and a second `anneal server`.
#   1. Ctrl-C (SIGINT to the CLI's process group, as a terminal sends it) mid-training: the CLI says it
#      stops the job, the ranks checkpoint, the job ends Stopped, the CLI exits 130, and no process of
#      the job is left; the same spec submitted again resumes from that checkpoint and completes.
#   2. Ctrl-C twice: the second detaches at once (exit 130, saying how to look at the job), and the job's
#      processes are still gone within its grace period.
#   3. A second `anneal server` on the same --data-dir, or on the address another server listens on,
#      is refused (exit 2) naming the first one's pid (and URL); Ctrl-C of `submit --wait` on a server
#      detaches (exit 130) and leaves the job be.
#   4. A job whose command fails: the user's failure ("failed (user error)", never "internal error"),
#      exit 1; the final line's exit code is describe's; the last log line comes before it; the hints
#      carry --local.
#   5. --dry-run prints the resolved spec and submits nothing; --instances and --env override the
#      spec, and a bad override is refused naming the field.
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.."
export OMP_NUM_THREADS=1
PY=/usr/bin/python3
SERVER=""
cleanup() {
  [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null
  pkill -f -- "$TMP/" 2>/dev/null
  [ -n "${KEEP:-}" ] || rm -rf "$TMP"
}
trap cleanup EXIT
"$ANNEAL" prep --input data/kjv --output "$TMP/ds" --val-fraction 0.05 --unit-mb 1 --quiet >/dev/null
mkdir -p "$TMP/src"
job_config "$TMP/ds" 5000 0 >"$TMP/src/cfg.yaml"
cat >"$TMP/job.yaml" <<YAML
name: ctrlc
entrypoint:
  command: 'exec anneal train --config cfg.yaml --set train.checkpoint_dir=\$ANNEAL_CHECKPOINT_URI'
source: src
checkpoint: {uri: "file://$TMP/ck", sync: false}
stopping: {grace_period_s: 20}
environment: {OMP_NUM_THREADS: "1"}
YAML
export PATH="$(dirname "$ANNEAL"):$PATH"
unset ANNEAL_TOKEN_FILE
job_procs() { pgrep -f -- "$ANNEAL_HOME/local/instances" >/dev/null; }
gone_within() {  # SECONDS: no process of the job left by then
  for _ in $(seq 1 $(($1 * 10))); do job_procs || return 0; sleep 0.1; done
  return 1
}
submit_bg() {  # OUT: `anneal submit --local` in its own process group (a terminal's foreground job)
  setsid "$ANNEAL" submit "$TMP/job.yaml" --local >"$TMP/$1.out" 2>"$TMP/$1.err" &
  CLI=$!
  for _ in $(seq 1 600); do grep -qE "step +5/" "$TMP/$1.out" && return 0; sleep 0.1; done
  return 1
}

# ---- 1. one Ctrl-C ----
check "submit --local reaches step 5" submit_bg one
kill -INT -- -$CLI
wait $CLI; rc=$?
check "one Ctrl-C: the CLI exits 130 (exit $rc)" test "$rc" -eq 130
check "... saying it stops the job and that a second Ctrl-C detaches" grep -q "SIGINT: stopping job ctrlc-0001.*Ctrl-C again to detach" "$TMP/one.err"
check "... the job ended Stopped" grep -q "job ctrlc-0001: Stopped" "$TMP/one.err"
check "... the ranks saved a checkpoint on the way out" grep -qE "checkpoint file://$TMP/ck/step-[0-9]+ saved" "$TMP/one.out"
check "... and no process of the job is left" gone_within 5
step=$(ls "$TMP/ck" | sed -nE 's/step-0*([0-9]+)$/\1/p' | sort -n | tail -1)
sed -i "s/steps: 5000,/steps: $((step + 3)),/" "$TMP/src/cfg.yaml"
"$ANNEAL" submit "$TMP/job.yaml" --local >"$TMP/again.out" 2>"$TMP/again.err"; rc=$?
check "the same spec again completes (exit $rc)" test "$rc" -eq 0
check "... resumed from the Ctrl-C's checkpoint (step $step)" grep -q "resumed from file://$TMP/ck/step-0*$step at step $step" "$TMP/again.out"

# ---- 2. two Ctrl-Cs ----
sed -i "s/steps: $((step + 3)),/steps: 5000,/" "$TMP/src/cfg.yaml"
sed -i "s|file://$TMP/ck\"|file://$TMP/ck2\"|" "$TMP/job.yaml"  # from step 0 again
check "a second job reaches step 5" submit_bg two
kill -INT -- -$CLI
# Once the ranks are saving (the agent heard of the stop on its heartbeat), the second Ctrl-C.
for _ in $(seq 1 200); do grep -q "stop requested: saving a checkpoint" "$TMP/two.out" && break; sleep 0.1; done
kill -INT -- -$CLI
wait $CLI; rc=$?
check "two Ctrl-Cs: the CLI exits 130 (exit $rc)" test "$rc" -eq 130
check "... the second detaches, naming how to look at the job" grep -q "detached from job ctrlc-0003.*anneal describe ctrlc-0003 --local" "$TMP/two.err"
check "... and the job's processes are gone within its grace period (20 s)" gone_within 25

# ---- 3. one server per data folder and per address ----
"$ANNEAL" server --data-dir "$TMP/srv" --listen 127.0.0.1:0 --backend static >"$TMP/server.log" 2>&1 &
SERVER=$!
for _ in $(seq 1 100); do [ -s "$TMP/srv/server.json" ] && break; sleep 0.1; done
URL=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$TMP/srv/server.json")
expect_exit "a second server on the same --data-dir: exit 2, naming the first's pid and URL" 2 \
  "another anneal server \(pid $SERVER, $URL\) already serves the data folder" \
  "$ANNEAL" server --data-dir "$TMP/srv" --listen 127.0.0.1:0 --backend static
expect_exit "a second server on the first's address: exit 2, naming the first's pid" 2 \
  "cannot listen on ${URL#http://}: pid $SERVER \(anneal\) listens there" \
  "$ANNEAL" server --data-dir "$TMP/srv2" --listen "${URL#http://}" --backend static
check "... and the first still answers" curl -sf "$URL/v1/health" -o /dev/null
# --wait on a server: Ctrl-C detaches and the job stays (the static backend has no agent: Pending).
cat >"$TMP/wait.yaml" <<'YAML'
name: waits
entrypoint: {command: ["true"]}
YAML
ANNEAL_TOKEN_FILE="$TMP/srv/admin.token" setsid "$ANNEAL" submit "$TMP/wait.yaml" --server "$URL" --wait >"$TMP/wait.out" 2>"$TMP/wait.err" &
CLI=$!
for _ in $(seq 1 100); do grep -q "Pending" "$TMP/wait.err" && break; sleep 0.1; done
kill -INT -- -$CLI
wait $CLI; rc=$?
check "--wait on a server: Ctrl-C exits 130 (exit $rc)" test "$rc" -eq 130
check "... detaching, saying where the job runs and how to stop it" grep -q "detached; job waits-0001 keeps running on $URL.*anneal stop waits-0001" "$TMP/wait.err"
check "... and the job was not stopped" bash -c "ANNEAL_TOKEN_FILE='$TMP/srv/admin.token' '$ANNEAL' describe waits-0001 --server '$URL' | grep -q 'Status: *InProgress / Pending'"

# ---- 4. a failing command ----
cat >"$TMP/fail.yaml" <<'YAML'
name: fails
entrypoint: {command: 'echo "the last words"; exit 1'}
YAML
"$ANNEAL" submit "$TMP/fail.yaml" --local >"$TMP/fail.out" 2>"$TMP/fail.err"; rc=$?
check "a failing command: exit 1 (exit $rc)" test "$rc" -eq 1
check "... reported as the user's failure" grep -q "^anneal: error: job fails-0004 failed (user error): " "$TMP/fail.err"
check "... never as an internal error" bash -c "! grep -q 'internal error' '$TMP/fail.err'"
check "... its hints carry --local" grep -q "see 'anneal describe fails-0004 --local' and 'anneal logs fails-0004 --local'" "$TMP/fail.err"
described=$("$ANNEAL" describe fails-0004 --local --json | $PY -c 'import json,sys; print(json.load(sys.stdin)["exit_code"])')
check "... the final line's exit code is describe's ($described)" grep -q "^job fails-0004: Failed (Failed), exit code $described, in " "$TMP/fail.err"
check "... and the job's last line was printed" grep -q "the last words" "$TMP/fail.out"

# ---- 5. --dry-run and overrides ----
"$ANNEAL" submit "$TMP/job.yaml" --dry-run --instances 2 -e EXTRA=yes >"$TMP/dry.json" 2>"$TMP/dry.err"; rc=$?
check "--dry-run exits 0 (exit $rc)" test "$rc" -eq 0
check "... printing the resolved spec with the overrides" $PY -c '
import json,sys; s=json.load(open(sys.argv[1]))
assert s["resources"]["instance_count"]==2 and s["environment"]["EXTRA"]=="yes" and s["source"]==sys.argv[2], s' "$TMP/dry.json" "$TMP/src"
check "... and submits nothing" bash -c "! '$ANNEAL' jobs --local | grep -q ctrlc-0005"
expect_exit "a bad --env is refused naming the form" 2 "--env 'NOEQUALS' must be KEY=VALUE" \
  "$ANNEAL" submit "$TMP/job.yaml" --dry-run -e NOEQUALS
finish
