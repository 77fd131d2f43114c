#!/bin/bash
# anneal's s3:// ObjectStore against a real S3 server: Ceph radosgw on loopback (started here by
# scripts/start_radosgw.sh, stopped at exit), with s3cmd as the peer client. Runs the conformance
# suite, the wrong-secret case, and interoperability both ways (s3cmd writes, anneal reads; anneal
# writes, s3cmd reads).
set -uo pipefail
TESTS=${1:-build/release/tests/anneal_s3_tests}
DIR=$(mktemp -d /tmp/anneal_rgw.XXXXXX)
RGW_PORT=$((20000 + RANDOM % 20000)) MON_PORT=$((40000 + RANDOM % 10000))
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
"$TESTS" || { echo "FAIL the S3 conformance tests"; exit 1; }
$S3CMD get "s3://anneal-test/interop/written by anneal.txt" "$DIR/back.txt" >/dev/null 2>&1 \
  && [ "$(cat "$DIR/back.txt")" = "hello from anneal" ] || { echo "FAIL s3cmd could not read what anneal wrote"; exit 1; }
echo "ok   s3cmd reads the object anneal wrote"
echo "1 passed, 0 failed"
