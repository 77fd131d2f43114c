#!/bin/bash
# anneal's s3:// ObjectStore against a real S3 server: Ceph radosgw on loopback (started here by
# scripts/start_radosgw.sh, stopped at exit), with s3cmd as the peer client. Runs the conformance
# suite, the wrong-secret case, and interoperability both ways (s3cmd writes, anneal reads; anneal
# writes, s3cmd reads).
set -uo pipefail
TESTS=${1:-build/release/tests/anneal_s3_tests}
DIR=$(mktemp -d /tmp/anneal_rgw.XXXXXX)
read -r RGW_PORT MON_PORT <<<"$(scripts/free_port.sh 2)"
trap 'scripts/start_radosgw.sh --stop "$DIR/ceph"; rm -rf "$DIR"' EXIT
env_line=$(scripts/start_radosgw.sh "$DIR/ceph" $RGW_PORT $MON_PORT) || { echo "FAIL radosgw did not start"; exit 1; }
eval "$env_line"
S3CMD="s3cmd --access_key=$AWS_ACCESS_KEY_ID --secret_key=$AWS_SECRET_ACCESS_KEY --host=127.0.0.1:$RGW_PORT \
  --host-bucket=127.0.0.1:$RGW_PORT --no-ssl --region=us-east-1 -c /dev/null"
$S3CMD mb s3://anneal-test >/dev/null || { echo "FAIL s3cmd could not create the bucket"; exit 1; }
echo "peer object, written by s3cmd" >"$DIR/peer.txt"
$S3CMD put "$DIR/peer.txt" "s3://anneal-test/interop/from peer.txt" >/dev/null || { echo "FAIL s3cmd put"; exit 1; }
export ANNEAL_S3_URI=s3://anneal-test/conformance-$$ ANNEAL_S3_PEER_URI=s3://anneal-test/interop ANNEAL_S3_VHOST=1
export ANNEAL_S3_PEER_KEY="from peer.txt" ANNEAL_S3_PEER_CONTENT="$(cat "$DIR/peer.txt")
"
source tests/testing/gtest_run.sh
gtest_run "$TESTS" '*' || { echo "FAIL the S3 conformance tests"; exit 1; }
$S3CMD get "s3://anneal-test/interop/written by anneal.txt" "$DIR/back.txt" >/dev/null 2>&1 \
  && [ "$(cat "$DIR/back.txt")" = "hello from anneal" ] || { echo "FAIL s3cmd could not read what anneal wrote"; exit 1; }
echo "ok   s3cmd reads the object anneal wrote"

# Checkpoints on radosgw: a run saves asynchronously every 2 steps to s3://, a second run resumes from
# the newest complete manifest found by listing; anneal ckpt lists and verifies; s3cmd sees the objects.
ANNEAL=${ANNEAL:-$(dirname "$TESTS")/../src/anneal}
"$ANNEAL" prep --input data/kjv --output "$DIR/ds" --val-fraction 0.05 --unit-mb 1 --quiet >/dev/null || { echo "FAIL prep"; exit 1; }
cat >"$DIR/cfg.yaml" <<YAML
model: {vocab_size: 50257, max_seq_len: 32, n_layer: 2, n_head: 2, n_embd: 32}
data: {dir: $DIR/ds, seq_len: 32, batch_size: 2, seed: 3}
train: {steps: 4, checkpoint_every: 2, checkpoint_dir: "s3://anneal-test/run-$$", eval_batches: 1, peak_gflops: 100, threads: 1}
YAML
"$ANNEAL" train --config "$DIR/cfg.yaml" >"$DIR/run1.log" 2>&1 || { echo "FAIL training with s3:// checkpoints: $(tail -3 "$DIR/run1.log")"; exit 1; }
grep -q "checkpoint s3://anneal-test/run-$$/step-00000004 committed" "$DIR/run1.log" || { echo "FAIL no committed checkpoint in the log"; exit 1; }
echo "ok   training wrote asynchronous checkpoints to radosgw"
"$ANNEAL" train --config "$DIR/cfg.yaml" --set train.steps=6 >"$DIR/run2.log" 2>&1 || { echo "FAIL resume from s3://"; exit 1; }
grep -q "resumed from s3://anneal-test/run-$$/step-00000004 at step 4" "$DIR/run2.log" || { echo "FAIL did not resume: $(head -3 "$DIR/run2.log")"; exit 1; }
echo "ok   a second run resumed from the newest manifest on radosgw"
# ... and the resumed run is the uninterrupted one: steps 5-6 and the final state, bit for bit.
"$ANNEAL" train --config "$DIR/cfg.yaml" --set train.steps=6 --set train.checkpoint_dir= >"$DIR/whole.log" 2>&1 ||
  { echo "FAIL the uninterrupted 6-step run"; exit 1; }
after4() { grep -E '^step +[56]/6 \| loss' "$1" | grep -oE 'loss [0-9.]+ \(0x[^)]*\)'; grep -E '^state hash' "$1"; }
[ "$(after4 "$DIR/whole.log" | wc -l)" -eq 3 ] && [ "$(after4 "$DIR/run2.log")" = "$(after4 "$DIR/whole.log")" ] ||
  { echo "FAIL the run resumed from s3:// differs from the uninterrupted one: $(after4 "$DIR/run2.log" | tr '\n' ' ') vs $(after4 "$DIR/whole.log" | tr '\n' ' ')"; exit 1; }
echo "ok   ... and its steps 5-6 and final state hash are the uninterrupted run's ($(grep -oE '[0-9a-f]{16}$' "$DIR/whole.log" | tail -1))"
"$ANNEAL" ckpt ls "s3://anneal-test/run-$$" | grep -q "step-00000006   complete" || { echo "FAIL anneal ckpt ls"; exit 1; }
"$ANNEAL" ckpt verify "s3://anneal-test/run-$$" --all >/dev/null || { echo "FAIL anneal ckpt verify"; exit 1; }
$S3CMD ls --recursive "s3://anneal-test/run-$$/step-00000006/" | grep -q "manifest.json" || { echo "FAIL s3cmd does not see the manifest"; exit 1; }
echo "ok   anneal ckpt ls/verify on s3://, and s3cmd lists the checkpoint"

# The file data channel: the dataset uploaded by s3cmd, copied to local disk (checksummed) by a run
# with data.mode = file: the same losses as the run that read the folder in place.
$S3CMD put --recursive "$DIR/ds/" "s3://anneal-test/datasets/kjv/" >/dev/null || { echo "FAIL s3cmd upload of the dataset"; exit 1; }
"$ANNEAL" train --config "$DIR/cfg.yaml" --set train.checkpoint_dir= >"$DIR/shared.log" 2>&1 || { echo "FAIL shared run"; exit 1; }
"$ANNEAL" train --config "$DIR/cfg.yaml" --set train.checkpoint_dir= --set data.mode=file \
  --set data.dir=s3://anneal-test/datasets/kjv --set data.local_dir="$DIR/local" >"$DIR/file.log" 2>&1 \
  || { echo "FAIL file-channel run: $(tail -3 "$DIR/file.log")"; exit 1; }
losses() { grep -oE 'loss [0-9.]+ \(0x[^)]*\)' "$1"; }
[ -n "$(losses "$DIR/file.log")" ] && [ "$(losses "$DIR/shared.log")" = "$(losses "$DIR/file.log")" ] \
  || { echo "FAIL the file channel's losses differ from the shared run's"; exit 1; }
echo "ok   data.mode=file from radosgw gives the batches of the folder read in place"
"$ANNEAL" train --config "$DIR/cfg.yaml" --set train.checkpoint_dir= --set data.mode=fastfile \
  --set data.dir=s3://anneal-test/datasets/kjv >"$DIR/fastfile.log" 2>&1 || { echo "FAIL fastfile run: $(tail -3 "$DIR/fastfile.log")"; exit 1; }
[ "$(losses "$DIR/shared.log")" = "$(losses "$DIR/fastfile.log")" ] \
  || { echo "FAIL the fastfile channel's losses differ from the shared run's"; exit 1; }
echo "ok   data.mode=fastfile streams from radosgw and gives the same batches"
echo "1 passed, 0 failed"
