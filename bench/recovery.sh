#!/usr/bin/env bash
# Recovery from a rank failure: the built-in trainer (L=2, C=128, T=128, B=8; a checkpoint every 10
# steps) is SIGKILLed right after step 25, once as a control-plane job (retry.max_attempts 2: the
# server restarts it on a fresh instance) and once under `anneal launch --max-restarts 1` (the peer:
# the same ranks restarted in place, no server, no new instance). For each, from the kill:
#   detection    until the failure is known (the job's Restarting; the launcher's restart line)
#   restart      until the new ranks run (the job's Training; the launcher's new attempt line)
#   ckpt load    until the new rank says "resumed from" (model, optimizer, sampler restored)
#   first step   until the first step after the resume is logged
# and the steps done again (the last step before the kill minus the step resumed from), against the
# checkpoint interval. Timestamps: the agent's receipt of each line (job); this script's (launch).
# BENCH_SMOKE=1: an L=2 C=32 T=32 B=2 trainer, a checkpoint every 5 steps (the newest 2 kept), killed after
# step 12, each run ended by train.max_seconds 6 (time for the job's logs, shipped every second, to show
# step 12 before the run ends, however fast the steps), one thread per rank (under a loaded CI machine
# two spinning threads made a step take 0.3-0.5 s, and 3 s did not reach step 12): figures mean nothing.
set -euo pipefail
source "$(dirname "$0")/train_lib.sh"
PY=/usr/bin/python3
if [ "$SMOKE" = 1 ]; then
  MODEL="n_layer: 2, n_head: 2, n_embd: 32" T=32 B=2 STEPS=100000 EVERY=5 KILL_AFTER=12 WAIT_S=120 THREADS=1
  MORE=", max_seconds: 6, checkpoint_keep: 2"
else
  MODEL="n_layer: 2, n_head: 4, n_embd: 128" T=128 B=8 STEPS=45 EVERY=10 KILL_AFTER=25 WAIT_S=1200 THREADS=2 MORE=
fi
# fail MESSAGE: exits 1, saying why (instead of waiting for ever or printing no figures)
fail() { echo "recovery: $*" >&2; exit 1; }
deadline=$(( SECONDS + WAIT_S ))
TMP=$(mktemp -d /var/tmp/anneal_recovery.XXXXXX); chmod 711 "$TMP"  # its jobs read files in it (tests/e2e/lib.sh)
"$ANNEAL" server --data-dir "$TMP/srv" --listen 127.0.0.1:0 --max-instances 2 --heartbeat-s 0.5 >"$TMP/server.log" 2>&1 &
SERVER=$!
LAUNCH=
source "$(dirname "$0")/server_lib.sh"  # await_server, running, stop_server
# On exit: the launcher (its ranks with it), then the server and its agents.
cleanup() {
  if [ -n "$LAUNCH" ]; then pkill -P "$LAUNCH" 2>/dev/null || true; wait "$LAUNCH" 2>/dev/null || true; fi
  stop_server
  rm -rf "$TMP" "$cfg"
}
trap cleanup EXIT
await_server
write_config <<YAML
model: {vocab_size: 50257, max_seq_len: $T, $MODEL}
data: {dir: $DATA, seq_len: $T, batch_size: $B, seed: 1}
train: {steps: $STEPS, log_every: 1, eval_every: 0, eval_batches: 1, checkpoint_every: $EVERY, resume: auto, checkpoint_async: false$MORE}
YAML
install -m 644 "$cfg" "$TMP/train.yaml"  # mktemp made it 0600: the job uid reads it

# ---- as a job ----
cat >"$TMP/job.yaml" <<YAML
name: recovery
entrypoint:
  command: [anneal, train, --config, $TMP/train.yaml]
  hyperparameters: {train.checkpoint_dir: "\${ANNEAL_CHECKPOINT_URI}"}
checkpoint: {uri: "$TMP/ck_job", sync: false}
retry: {max_attempts: 2}
environment: {OMP_NUM_THREADS: "$THREADS"}
YAML
id=$("$ANNEAL" submit "$TMP/job.yaml" --server "$URL")
# (output captured first: with pipefail, grep -q closing the pipe early would fail the pipeline)
until grep -qE "step +$KILL_AFTER/" <<<"$("$ANNEAL" logs "$id" --server "$URL" --rank 0)"; do
  [ $SECONDS -lt $deadline ] || fail "the job never logged step $KILL_AFTER"; sleep 0.05
done
t_kill=$(date +%s.%N)
pkill -9 -f "^$ANNEAL train .*checkpoint_dir=$TMP/ck_job" || fail "the job's rank was gone before the kill (all $STEPS steps done?)"
until grep -qE 'Status: *(Completed|Failed|Stopped)' <<<"$("$ANNEAL" describe "$id" --server "$URL")"; do
  [ $SECONDS -lt $deadline ] || fail "the job never ended"; sleep 0.5
done
"$ANNEAL" describe "$id" --server "$URL" --json >"$TMP/job.json"
curl -s -H "Authorization: Bearer $(cat "$ANNEAL_TOKEN_FILE")" "$URL/v1/jobs/$id/logs?rank=0&limit=10000" >"$TMP/job.logs"
# ---- the peer: anneal launch restarting in place ----
( OMP_NUM_THREADS=$THREADS "$ANNEAL" launch --nproc-per-node 1 --max-restarts 1 -- "$ANNEAL" train --config "$TMP/train.yaml" \
    --set train.checkpoint_dir="$TMP/ck_launch" 2>&1 |
  $PY -u -c 'import sys, time
for l in sys.stdin: print("%.3f %s" % (time.time(), l), end="", flush=True)' >"$TMP/launch.log" ) &
LAUNCH=$!
until grep -qE "step +$KILL_AFTER/" "$TMP/launch.log" 2>/dev/null; do
  kill -0 $LAUNCH 2>/dev/null && [ $SECONDS -lt $deadline ] || fail "anneal launch never logged step $KILL_AFTER"; sleep 0.05
done
t_kill_l=$(date +%s.%N)
pkill -9 -f "^$ANNEAL train .*checkpoint_dir=$TMP/ck_launch" || fail "the launcher's rank was gone before the kill (all $STEPS steps done?)"
wait $LAUNCH || true
LAUNCH=

$PY - "$TMP" "$t_kill" "$t_kill_l" "$KILL_AFTER" "$EVERY" <<'PY'
import json, re, sys
tmp, t_kill, t_kill_l = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
kill_after, every = int(sys.argv[4]), int(sys.argv[5])
step_re = re.compile(r"step +(\d+)/\d+ ")
def splits(lines, t_kill, detected, restarted):
    """lines: [(time, text)] in order; returns the phases after t_kill and the steps redone."""
    before = [int(step_re.search(x).group(1)) for t, x in lines if t <= t_kill and step_re.search(x)]
    resumed = [(t, x) for t, x in lines if t > t_kill and "resumed from" in x]
    rt, rx = resumed[0]
    from_step = int(re.search(r"at step (\d+)", rx).group(1))
    first = [t for t, x in lines if t > rt and step_re.search(x)][0]
    return detected - t_kill, restarted - detected, rt - restarted, first - rt, first - t_kill, max(before) - from_step
j = json.load(open(tmp + "/job.json"))
h = {}
for x in j["history"]:
    h.setdefault(x["secondary_status"], []).append(x["at"])
lines = [(x["at"], x["text"]) for x in json.load(open(tmp + "/job.logs"))["lines"]]
job = splits(lines, t_kill, h["Restarting"][0], [t for t in h["Training"] if t > h["Restarting"][0]][0])
ll = []
for raw in open(tmp + "/launch.log"):
    t, _, text = raw.partition(" ")
    ll.append((float(t), text))
det = [t for t, x in ll if t > t_kill_l and "failed first" in x][0]
rst = [t for t, x in ll if t > t_kill_l and "attempt 1: started ranks" in x][0]
launch = splits(ll, t_kill_l, det, rst)
print("%-44s %12s %12s" % ("from the kill of rank 0 after step %d" % kill_after, "anneal job", "anneal launch"))
names = ["detection", "restart (new ranks running)", "checkpoint load (to 'resumed from')", "first step after the resume", "total: kill -> training again"]
for i, n in enumerate(names):
    print("%-44s %11.2fs %11.2fs" % (n, job[i], launch[i]))
print("%-44s %12d %12d   (checkpoint every %d steps)" % ("steps done again", job[5], launch[5], every))
print("RESULT recovery_job_total_s=%.2f detection_s=%.2f restart_s=%.2f ckpt_load_s=%.2f steps_redone=%d" % (job[4], job[0], job[1], job[2], job[5]))
print("RESULT recovery_launch_total_s=%.2f detection_s=%.2f restart_s=%.2f ckpt_load_s=%.2f steps_redone=%d" % (launch[4], launch[0], launch[1], launch[2], launch[5]))
PY
