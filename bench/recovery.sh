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
set -euo pipefail
source "$(dirname "$0")/train_lib.sh"
ANNEAL=$(readlink -f "$ANNEAL")
DATA=$(readlink -f "$DATA")
PY=/usr/bin/python3
TMP=$(mktemp -d /tmp/anneal_recovery.XXXXXX)
"$ANNEAL" server --data-dir "$TMP/srv" --listen 127.0.0.1:0 --max-instances 2 --heartbeat-s 0.5 >"$TMP/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null; rm -rf "$TMP" "$cfg"' EXIT
for _ in $(seq 1 100); do [ -s "$TMP/srv/server.json" ] && break; sleep 0.1; done
URL=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$TMP/srv/server.json")
export ANNEAL_TOKEN_FILE="$TMP/srv/admin.token"  # the admin token the server created
write_config <<YAML
model: {vocab_size: 50257, max_seq_len: 128, n_layer: 2, n_head: 4, n_embd: 128}
data: {dir: $DATA, seq_len: 128, batch_size: 8, seed: 1}
train: {steps: 45, log_every: 1, eval_every: 0, eval_batches: 1, checkpoint_every: 10, resume: auto, checkpoint_async: false}
YAML
cp "$cfg" "$TMP/train.yaml"
KILL_AFTER=25

# ---- as a job ----
cat >"$TMP/job.yaml" <<YAML
name: recovery
entrypoint:
  command: [anneal, train, --config, $TMP/train.yaml]
  hyperparameters: {train.checkpoint_dir: "\${ANNEAL_CHECKPOINT_URI}"}
checkpoint: {uri: "$TMP/ck_job", sync: false}
retry: {max_attempts: 2}
environment: {OMP_NUM_THREADS: "2"}
YAML
id=$("$ANNEAL" submit "$TMP/job.yaml" --server "$URL")
# (output captured first: with pipefail, grep -q closing the pipe early would fail the pipeline)
until grep -qE "step +$KILL_AFTER/" <<<"$("$ANNEAL" logs "$id" --server "$URL" --rank 0)"; do sleep 0.05; done
t_kill=$(date +%s.%N)
pkill -9 -f "^$ANNEAL train .*checkpoint_dir=$TMP/ck_job"
until grep -qE 'Status: *(Completed|Failed|Stopped)' <<<"$("$ANNEAL" describe "$id" --server "$URL")"; do sleep 0.5; done
"$ANNEAL" describe "$id" --server "$URL" --json >"$TMP/job.json"
curl -s -H "Authorization: Bearer $(cat "$ANNEAL_TOKEN_FILE")" "$URL/v1/jobs/$id/logs?rank=0&limit=10000" >"$TMP/job.logs"
# ---- the peer: anneal launch restarting in place ----
( OMP_NUM_THREADS=2 "$ANNEAL" launch --nproc-per-node 1 --max-restarts 1 -- "$ANNEAL" train --config "$TMP/train.yaml" \
    --set train.checkpoint_dir="$TMP/ck_launch" 2>&1 |
  $PY -u -c 'import sys, time
for l in sys.stdin: print("%.3f %s" % (time.time(), l), end="", flush=True)' >"$TMP/launch.log" ) &
LAUNCH=$!
until grep -qE "step +$KILL_AFTER/" "$TMP/launch.log" 2>/dev/null; do sleep 0.05; done
t_kill_l=$(date +%s.%N)
pkill -9 -f "^$ANNEAL train .*checkpoint_dir=$TMP/ck_launch"
wait $LAUNCH || true

$PY - "$TMP" "$t_kill" "$t_kill_l" <<'PY'
import json, re, sys
tmp, t_kill, t_kill_l = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
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
print("%-44s %12s %12s" % ("from the kill of rank 0 after step 25", "anneal job", "anneal launch"))
names = ["detection", "restart (new ranks running)", "checkpoint load (to 'resumed from')", "first step after the resume", "total: kill -> training again"]
for i, n in enumerate(names):
    print("%-44s %11.2fs %11.2fs" % (n, job[i], launch[i]))
print("%-44s %12d %12d   (checkpoint every 10 steps)" % ("steps done again", job[5], launch[5]))
print("RESULT recovery_job_total_s=%.2f detection_s=%.2f restart_s=%.2f ckpt_load_s=%.2f steps_redone=%d" % (job[4], job[0], job[1], job[2], job[5]))
print("RESULT recovery_launch_total_s=%.2f detection_s=%.2f restart_s=%.2f ckpt_load_s=%.2f steps_redone=%d" % (launch[4], launch[0], launch[1], launch[2], launch[5]))
PY
