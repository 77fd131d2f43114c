#!/bin/bash
# S3 throughput on a real server: Ceph radosgw on loopback (scripts/start_radosgw.sh, one OSD on this
# machine's disk), anneal's client (bench/s3_throughput.cc) against s3cmd (the peer) putting and then
# getting the same COUNT objects of SIZE_MB random bytes, one after another, in one run. anneal sends
# objects above 64 MB as multipart uploads (16 MB parts, 4 threads); s3cmd as 15 MB parts, one at a
# time. Prints MB/s for both and the ratios (target: at least 1.0).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build/release}
SIZE_MB=${SIZE_MB:-96} COUNT=${COUNT:-4}
DIR=$(mktemp -d /tmp/anneal_s3bench.XXXXXX)
RGW_PORT=$((20000 + RANDOM % 20000)) MON_PORT=$((40000 + RANDOM % 10000))
trap 'scripts/start_radosgw.sh --stop "$DIR/ceph" >/dev/null 2>&1; rm -rf "$DIR"' EXIT
eval "$(scripts/start_radosgw.sh "$DIR/ceph" $RGW_PORT $MON_PORT)"
S3CMD="s3cmd --access_key=$AWS_ACCESS_KEY_ID --secret_key=$AWS_SECRET_ACCESS_KEY --host=127.0.0.1:$RGW_PORT \
  --host-bucket=127.0.0.1:$RGW_PORT --no-ssl --region=us-east-1 -c /dev/null --no-progress"
$S3CMD mb s3://bench >/dev/null
head -c $((SIZE_MB * 1000000)) /dev/urandom >"$DIR/obj"
now() { date +%s.%N; }
t0=$(now)
for i in $(seq 1 "$COUNT"); do $S3CMD put "$DIR/obj" "s3://bench/s3cmd/obj-$i" >/dev/null; done
t1=$(now)
for i in $(seq 1 "$COUNT"); do $S3CMD get --force "s3://bench/s3cmd/obj-$i" "$DIR/back" >/dev/null; done
t2=$(now)
cmp -s "$DIR/obj" "$DIR/back" || { echo "s3cmd read back different bytes"; exit 1; }
peer_put=$(echo "$SIZE_MB * $COUNT / ($t1 - $t0)" | bc -l)
peer_get=$(echo "$SIZE_MB * $COUNT / ($t2 - $t1)" | bc -l)
out=$("$BUILD/bench/s3_throughput_anneal" s3://bench/anneal "$SIZE_MB" "$COUNT")
ours_put=$(sed -n 's/^put \([0-9.]*\) MB\/s/\1/p' <<<"$out")
ours_get=$(sed -n 's/^get \([0-9.]*\) MB\/s/\1/p' <<<"$out")
printf "%-10s %12s %12s %8s\n" "" "anneal MB/s" "s3cmd MB/s" ratio
printf "%-10s %12.1f %12.1f %8.2f\n" PUT "$ours_put" "$peer_put" "$(echo "$ours_put / $peer_put" | bc -l)"
printf "%-10s %12.1f %12.1f %8.2f\n" GET "$ours_get" "$peer_get" "$(echo "$ours_get / $peer_get" | bc -l)"
echo "($COUNT objects of $SIZE_MB MB each, radosgw on loopback)"
echo "RESULT s3_throughput size_mb=$SIZE_MB count=$COUNT anneal_put=$(printf %.1f "$ours_put") s3cmd_put=$(printf %.1f "$peer_put") put_ratio=$(printf %.2f "$(echo "$ours_put / $peer_put" | bc -l)") anneal_get=$(printf %.1f "$ours_get") s3cmd_get=$(printf %.1f "$peer_get") get_ratio=$(printf %.2f "$(echo "$ours_get / $peer_get" | bc -l)")" >&2
