#!/usr/bin/env bash
# Bring your own script: examples/jobs/ddp_torch/train.py, plain PyTorch DDP over gloo (Debian's
# python3-torch), shipped through `source`, runs unchanged under the control plane on 2 instances of
# 1 rank and on 1 instance of 2 ranks. Both ranks end with identical parameters, both layouts give the
# same parameters, its checkpoints (saved to $ANNEAL_CHECKPOINT_DIR) appear under the checkpoint URI,
# and a resubmitted job restores them and resumes. The same job in a container (image: an image of
# this host's python3 and torch, imported from a local tar) reaches the same parameters bit for bit,
# and its checkpoint resumes outside the container to the same final parameters as above.
# Then FSDP: examples/jobs/fsdp_torch/train.py (PyTorch 2's fully_shard over gloo, tools/venv's torch)
# on 2 instances, once uninterrupted and once with a rank SIGKILLed after its epoch-1 checkpoint
# (torch.distributed.checkpoint shards, synced by each agent): the retried attempt resumes from it and
# ends in the uninterrupted run's state, compared by torch.testing.assert_close at zero tolerance.
source "$(dirname "$0")/../e2e/lib.sh"
source "$(dirname "$0")/../../scripts/host_image.sh"
PY=/usr/bin/python3
$PY -c 'import torch' 2>/dev/null || skip "no PyTorch for $PY (scripts/setup.sh installs python3-torch)"
VENV_PY=$PWD/tools/venv/bin/python  # not resolved: the venv is found through its own path
"$VENV_PY" -c 'from torch.distributed.fsdp import fully_shard' 2>/dev/null ||
  skip "no PyTorch 2 with fully_shard in tools/venv (scripts/setup.sh installs it)"
"$ANNEAL" server --data-dir "$TMP/srv" --listen 127.0.0.1:0 --max-instances 2 --heartbeat-s 0.2 >"$TMP/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null; rm -rf "$TMP"' EXIT
for _ in $(seq 1 100); do [ -s "$TMP/srv/server.json" ] && break; sleep 0.1; done
URL=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$TMP/srv/server.json")
export ANNEAL_TOKEN_FILE="$TMP/srv/admin.token"  # the admin token the server created
cp -r examples/jobs/ddp_torch "$TMP/job"

digests() { grep -oE 'final parameters sha256 [0-9a-f]+' "$1" | awk '{print $4}' | sort -u; }
for layout in 2x1 1x2; do
  sed -e "s#uri: ../../../out/ddp_torch_ckpt#uri: $TMP/ck_$layout#" "$TMP/job/job_$layout.yaml" >"$TMP/job/run_$layout.yaml"
  "$ANNEAL" submit "$TMP/job/run_$layout.yaml" --server "$URL" --wait >"$TMP/$layout.out" 2>"$TMP/$layout.err"
  check "$layout: the DDP job completes" test $? -eq 0
  check "$layout: both ranks report their parameters" test "$(grep -c 'final parameters sha256' "$TMP/$layout.out")" -eq 2
  check "$layout: both ranks end with identical parameters" test "$(digests "$TMP/$layout.out" | wc -l)" -eq 1
  check "$layout: ranks ran with the torchrun variables (world 2)" grep -q 'of 2: final parameters' "$TMP/$layout.out"
  check "$layout: its checkpoints are under the checkpoint URI" test -s "$TMP/ck_$layout/epoch-002.pt"
done
check "both layouts train to the same parameters" test "$(digests "$TMP/2x1.out")" = "$(digests "$TMP/1x2.out")"
echo "  parameters sha256 $(digests "$TMP/2x1.out")"

# Resubmitted with more epochs: the agent restores the checkpoints and the script resumes.
"$ANNEAL" submit "$TMP/job/run_2x1.yaml" --server "$URL" --wait -H epochs=4 >"$TMP/resume.out" 2>"$TMP/resume.err"
check "a resubmitted job completes" test $? -eq 0
check "... resuming from the restored checkpoint" grep -q 'resumed from epoch-002.pt' "$TMP/resume.out"
check "... and its new checkpoint reaches the URI" test -s "$TMP/ck_2x1/epoch-003.pt"

# ---- The same DDP example in a container image (image:), its checkpoint resumed outside it ----
# The image is this host's python3 and torch (scripts/host_image.sh), imported from a local tar: the
# same code, so the parameters must match the runs above bit for bit, in and out of the container.
if ! command -v podman >/dev/null; then
  skip_part "image: the DDP example in a container: podman is not installed (scripts/setup.sh installs it)"
else
  import_host_image anneal-peers/torch:1 --python "import torch, torch.distributed, torch.nn, argparse, hashlib" /bin/sh
  { sed -e "s#uri: ../../../out/ddp_torch_ckpt#uri: $TMP/ck_img#" "$TMP/job/job_2x1.yaml"; echo "image: anneal-peers/torch:1"; } \
    >"$TMP/job/img_2x1.yaml"
  "$ANNEAL" submit "$TMP/job/img_2x1.yaml" --server "$URL" --wait >"$TMP/img.out" 2>"$TMP/img.err"
  check "image: the DDP job completes in its containers" test $? -eq 0 || tail -5 "$TMP/img.err"
  check "... in the image (describe: sandbox uid N, image anneal-peers/torch:1)" \
    bash -c "'$ANNEAL' describe \"\$(head -1 '$TMP/img.out')\" --server '$URL' | grep -q 'sandbox: uid [0-9]*, image anneal-peers/torch:1'"
  check "... to the parameters of the same job outside a container" test "$(digests "$TMP/img.out")" = "$(digests "$TMP/2x1.out")"
  sed -e '/^image: /d' "$TMP/job/img_2x1.yaml" >"$TMP/job/img_out_2x1.yaml"
  "$ANNEAL" submit "$TMP/job/img_out_2x1.yaml" --server "$URL" --wait -H epochs=4 >"$TMP/img_resume.out" 2>"$TMP/img_resume.err"
  check "its checkpoint resumes outside the container" grep -q 'resumed from epoch-002.pt' "$TMP/img_resume.out"
  check "... bit-identically: the final parameters of the resume above ($(digests "$TMP/resume.out" | cut -c1-12))" \
    test "$(digests "$TMP/img_resume.out")" = "$(digests "$TMP/resume.out")"
  podman rmi -f anneal-peers/torch:1 >/dev/null 2>&1
fi

# ---- FSDP (torch 2), killed and resumed ----
field() { "$ANNEAL" describe "$1" --server "$URL" --json | $PY -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$2"; }
wait_status() {  # ID STATUS SECONDS
  for _ in $(seq 1 $(($3 * 10))); do [ "$(field "$1" status 2>/dev/null)" = "$2" ] && return 0; sleep 0.1; done
  return 1
}
wait_log() {  # ID PATTERN SECONDS: the job's logs show a line matching PATTERN
  for _ in $(seq 1 $(($3 * 10))); do
    "$ANNEAL" logs "$1" --server "$URL" 2>/dev/null | grep -qE -- "$2" && return 0; sleep 0.1
  done
  return 1
}
cp -r examples/jobs/fsdp_torch "$TMP/fsdp"
fsdp_spec() {  # NAME CHECKPOINT_DIR [EXTRA_HYPERPARAMETERS]: the example's spec, run by tools/venv's python
  sed -e "s#uri: ../../../out/fsdp_torch_ckpt#uri: $2#" -e "s#command: \[python, train.py\]#command: [$VENV_PY, train.py]#" \
      -e "s#hyperparameters: {epochs: 4, lr: 0.003}#hyperparameters: {epochs: 4, lr: 0.003${3:+, $3}}#" \
      "$TMP/fsdp/job_2x1.yaml" >"$TMP/fsdp/$1.yaml"
}
fsdp_spec plain "$TMP/fsdp_plain"
"$ANNEAL" submit "$TMP/fsdp/plain.yaml" --server "$URL" --wait >"$TMP/fsdp_plain.out" 2>"$TMP/fsdp_plain.err"
rc=$?
check "fsdp: the uninterrupted job completes on 2 instances (submit --wait exit $rc)" test $rc -eq 0 ||
  { tail -n 5 "$TMP/fsdp_plain.out" "$TMP/fsdp_plain.err" | sed 's/^/  /'  # an intermittent failure: say what it said
    pid_line=$(grep -oE 'fsdp-torch-[0-9]+' "$TMP/fsdp_plain.out" "$TMP/fsdp_plain.err" | head -1 | cut -d: -f2)
    [ -z "$pid_line" ] || { "$ANNEAL" describe "$pid_line" --server "$URL" 2>&1 | tail -25 | sed 's/^/  /'
                            "$ANNEAL" logs "$pid_line" --server "$URL" --tail 30 2>&1 | sed 's/^/  /'; }; }
check "... its sharded checkpoints hold both ranks' shards" test -s "$TMP/fsdp_plain/epoch-003/__1_0.distcp" -a -s "$TMP/fsdp_plain/epoch-003/.metadata"
check "... and its final state is under the checkpoint URI" test -s "$TMP/fsdp_plain/final-state.pt"

fsdp_spec killed "$TMP/fsdp_killed" "pause-after-epoch: 1"
id=$("$ANNEAL" submit "$TMP/fsdp/killed.yaml" --server "$URL")
check "fsdp: both ranks pause after their epoch-1 checkpoint" wait_log "$id" "rank 1: paused after epoch 1" 120
# Rank 1's own process (the only one running this job's train.py with --pause-after-epoch), by pid.
pid=$(pgrep -f -- "$VENV_PY train.py --epochs 4 --lr 0.003 --pause-after-epoch 1" | while read -r p; do
  grep -qz '^RANK=1$' "/proc/$p/environ" 2>/dev/null && echo "$p"; done)
check "... rank 1's process found (pid ${pid//$'\n'/ })" test "$(wc -w <<<"$pid")" -eq 1
kill -9 $pid && echo "  killed rank 1 (pid $pid) of $id"
check "the killed FSDP job completes" wait_status "$id" Completed 180 ||
  { "$ANNEAL" describe "$id" --server "$URL" 2>&1 | tail -25 | sed 's/^/  /'  # an intermittent failure: what the job went through
    "$ANNEAL" logs "$id" --server "$URL" --tail 15 2>&1 | sed 's/^/  /'; }
"$ANNEAL" describe "$id" --server "$URL" --json >"$TMP/fsdp_killed.json"
check "... through a retry after an infrastructure failure (rank 1 SIGKILLed)" \
  grep -qE 'attempt 0 failed \(infrastructure[^"]*SIGKILL' "$TMP/fsdp_killed.json"
"$ANNEAL" logs "$id" --server "$URL" >"$TMP/fsdp_killed.log" 2>&1
check "... both ranks resumed from the epoch-1 checkpoint" test "$(grep -c 'resumed from epoch-001' "$TMP/fsdp_killed.log")" -eq 2
"$VENV_PY" tests/peers/fsdp_compare.py "$TMP/fsdp_plain/final-state.pt" "$TMP/fsdp_killed/final-state.pt" >"$TMP/cmp.txt" 2>&1
cmp_rc=$?
check "killed and resumed = uninterrupted, by torch.testing.assert_close (rtol=0, atol=0): $(tail -1 "$TMP/cmp.txt")" test $cmp_rc -eq 0
finish
