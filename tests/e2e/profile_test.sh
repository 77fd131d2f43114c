#!/usr/bin/env bash
# The step profiler (train.profile_steps; train/profiler.h) and `anneal profile` (cli/profile_cmd.cc):
#   1. a 2-stage pipeline run (4 micro-batches, a checkpoint inside the window) writes one trace per
#      rank that parses as the Trace Event Format, every span nested on its track; it holds each
#      layer's forward and backward, the data fetch, the optimizer, the pipeline's sends and
#      receives and the collectives with their bytes on their groups' tracks, the checkpoint, memory
#      counters and the rank's labels;
#   2. `anneal profile` merges them into one process per rank and prints where the time goes (the
#      summary rank 0 also logged at the window's end, category by category); each category's share
#      equals one computed independently from the trace files (a sweep over instants); its
#      pipeline idle fraction of the schedule agrees with the trainer's own report over the same steps
#      (2..8; within 5 points);
#   3. a 2-instance job of the control plane with output.uri: `anneal profile JOB` reads the ranks'
#      traces from the job's output;
#   4. bad input: profile_steps backwards (exit 2, naming the key), no traces or a file that is no
#      trace (exit 2, named).
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.."
PY=/usr/bin/python3
CHK="$PY tests/e2e/trace_check.py"
export OMP_NUM_THREADS=1
"$ANNEAL" prep --input data/kjv --output "$TMP/ds" --val-fraction 0.05 --unit-mb 1 --quiet >/dev/null
cat >"$TMP/cfg.yaml" <<YAML
model: {vocab_size: 50257, max_seq_len: 32, n_layer: 4, n_head: 2, n_embd: 32}
data: {dir: $TMP/ds, seq_len: 32, batch_size: 2, seed: 3}
optim: {lr: 3.0e-3, warmup_steps: 2}
train: {steps: 8, grad_accum: 4, log_every: 1, eval_every: 0, eval_batches: 2, seed: 11, peak_gflops: 100, threads: 1,
        resume: none, checkpoint_every: 3, checkpoint_async: false, profile_steps: [2, 8]}
dist: {pp: 2}
YAML

# ---- 1. a 2-stage pipeline run ----
(cd "$TMP" && "$ANNEAL" launch --nproc-per-node 2 -- "$ANNEAL" train --config cfg.yaml \
  --set train.checkpoint_dir="$TMP/ck") >"$TMP/pp.log" 2>&1
check "a 2-stage pipeline run with train.profile_steps [2, 8] completes" grep -q "all 2 local ranks of attempt 0 finished (exit code 0)" "$TMP/pp.log"
check "... rank 0 says where the traces went" grep -q "profile: steps 2-8 traced .* to profile/rank-00000.trace.json" "$TMP/pp.log"
T0="$TMP/profile/rank-00000.trace.json" T1="$TMP/profile/rank-00001.trace.json"
check "... each rank's trace is the Trace Event Format, its spans nested per track" $CHK valid "$T0" "$T1"
check "... 7 step spans each (steps 2..8)" \
  $PY -c 'import json,sys; [sys.exit(1) for p in sys.argv[1:] if sorted(e["name"] for e in json.load(open(p))["traceEvents"] if e.get("cat")=="step") != ["step %d" % i for i in range(2, 9)]]' "$T0" "$T1"
check "... forward and backward of every layer, each on its stage's rank" $CHK layers <($PY -c '
import json,sys; ev=[]; [ev.extend(json.load(open(p))["traceEvents"]) for p in sys.argv[1:]]; print(json.dumps({"traceEvents": ev}))' "$T0" "$T1") 4
check "... the data fetch and the optimizer" bash -c "$CHK has '$T0' data fetch && $CHK has '$T1' optimizer optimizer"
check "... the pipeline's sends (stage 0) and receives (stage 1) with their bytes" \
  bash -c "$CHK bytes '$T0' 'comm pp_fwd' send && $CHK bytes '$T1' 'comm pp_fwd' receive && $CHK has '$T0' pipeline 'wait receive'"
check "... the tied embedding's allreduce with its bytes" $CHK bytes "$T1" "comm embedding" allreduce
check "... the checkpoint at step 3" $CHK has "$T0" checkpoint "checkpoint save"
check "... memory counters and the rank's labels" \
  $PY -c 'import json,sys; d=json.load(open(sys.argv[1])); c=[e for e in d["traceEvents"] if e["ph"]=="C" and e["name"]=="memory"]; o=d["otherData"]; assert len(c)==7 and c[0]["args"]["resident_mb"]>1 and o["pp_rank"]=="1" and o["world"]=="2" and o["steps"]=="2-8", (c, o)' "$T1"

# ---- 2. anneal profile: merged, summarized ----
"$ANNEAL" profile "$TMP/profile" -o "$TMP/merged.json" >"$TMP/summary.txt" 2>&1
rc=$?
sed 's/^/  /' "$TMP/summary.txt"
check "anneal profile merges the ranks' traces (exit 0)" test $rc -eq 0
check "... one process per rank" $CHK processes "$TMP/merged.json" 2
check "... the merged file is still well-formed" $CHK valid "$TMP/merged.json"
check "... the summary names every category and gives a reading" \
  bash -c "for c in compute communication 'pipeline idle' data checkpoint other; do grep -q \"^  \$c \" '$TMP/summary.txt' || exit 1; done; grep -q '^reading: ' '$TMP/summary.txt'"
check "... rank 0's log holds the same summary of the same steps (each category's line identical)" \
  diff <(grep -E '^  (compute|communication|pipeline idle|data|checkpoint|other) ' "$TMP/summary.txt") \
       <(sed -nE 's/^\[rank 0\] profile: (  (compute|communication|pipeline idle|data|checkpoint|other) .*)/\1/p' "$TMP/pp.log")
check "... each category's share of the step equals a sweep over the raw traces' instants (trace_check.py, within 0.5 points)" \
  $CHK shares "$TMP/summary.txt" "$T0" "$T1"
idle_of() {  # SOURCE STAGE -> percent
  if [ "$1" = trainer ]; then sed -nE "s/.*pipeline idle \(blocked.*stage $2 ([0-9.]+)%.*/\1/p" "$TMP/pp.log" | tail -1
  else sed -nE "s/^  rank $2 \(.*pipeline idle of the schedule ([0-9.]+) %$/\1/p" "$TMP/summary.txt"; fi
}
for s in 0 1; do
  a=$(idle_of trainer $s) b=$(idle_of trace $s)
  check "... stage $s's pipeline idle: the trace's $b % against the trainer's $a %, within 5 points" \
    awk -v a="$a" -v b="$b" 'BEGIN { exit !(a != "" && b != "" && (a - b < 5 && b - a < 5)) }'
done

# ---- 3. a job's traces from its output ----
mkdir -p "$TMP/src"
sed -e "s|dir: $TMP/ds|dir: /nonexistent|" -e 's/dist: {pp: 2}/dist: {pp: 1}/' -e 's/checkpoint_every: 3/checkpoint_every: 0/' \
  "$TMP/cfg.yaml" >"$TMP/src/cfg.yaml"
cat >"$TMP/job.yaml" <<YAML
name: profiled
entrypoint:
  command: [anneal, train, --config, cfg.yaml]
  hyperparameters: {data.dir: "\${ANNEAL_CHANNEL_TRAIN}", train.steps: 4, train.profile_steps: "2,3"}
source: $TMP/src
channels: [{name: train, uri: $TMP/ds, mode: shared}]
output: {uri: "file://$TMP/outputs"}
resources: {instance_count: 2, procs_per_instance: 1}
YAML
"$ANNEAL" server --data-dir "$TMP/srv" --listen 127.0.0.1:0 >"$TMP/server.log" 2>&1 &
SERVER=$!
for _ in $(seq 1 100); do [ -s "$TMP/srv/server.json" ] && break; sleep 0.1; done
URL=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$TMP/srv/server.json")
export ANNEAL_TOKEN_FILE="$TMP/srv/admin.token"
"$ANNEAL" submit "$TMP/job.yaml" --server "$URL" --wait >"$TMP/job.out" 2>"$TMP/job.err"
check "a profiled 2-instance job completes" test $? -eq 0 || tail -5 "$TMP/job.err"
id=$(head -1 "$TMP/job.out")
(cd "$TMP" && "$ANNEAL" profile "$id" --server "$URL") >"$TMP/job_summary.txt" 2>&1
check "anneal profile $id reads both ranks' traces from the job's output.uri" \
  bash -c "grep -q 'merged 2 rank trace(s) into $id.trace.json' '$TMP/job_summary.txt' && $CHK processes '$TMP/$id.trace.json' 2" ||
  sed 's/^/  /' "$TMP/job_summary.txt"
kill "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null

# ---- 4. bad input ----
expect_exit "train.profile_steps [4, 2]: exit 2 naming the key" 2 "train.profile_steps = '4,2' must be \[FROM, TO\]" \
  "$ANNEAL" train --config "$TMP/cfg.yaml" --set train.profile_steps=4,2
mkdir -p "$TMP/empty"
expect_exit "anneal profile of a folder without traces: exit 2" 2 "no trace files" "$ANNEAL" profile "$TMP/empty" -o "$TMP/x.json"
expect_exit "anneal profile of a file that is no trace: exit 2, naming it" 2 "cfg.yaml: not JSON" \
  "$ANNEAL" profile "$TMP/cfg.yaml" -o "$TMP/x.json"
finish
