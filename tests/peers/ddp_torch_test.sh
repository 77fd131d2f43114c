#!/usr/bin/env bash
# Bring your own script: examples/jobs/ddp_torch/train.py, plain PyTorch DDP over gloo (Debian's
# python3-torch), shipped through `source`, runs unchanged under the control plane on 2 instances of
# 1 rank and on 1 instance of 2 ranks. Both ranks end with identical parameters, both layouts give the
# same parameters, its checkpoints (saved to $ANNEAL_CHECKPOINT_DIR) appear under the checkpoint URI,
# and a resubmitted job restores them and resumes.
source "$(dirname "$0")/../e2e/lib.sh"
PY=/usr/bin/python3
$PY -c 'import torch' 2>/dev/null || skip "no PyTorch for $PY (scripts/setup.sh installs python3-torch)"
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
finish
