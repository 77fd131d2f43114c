#!/bin/bash
# S3 throughput on a real server, the same work on every side: COUNT files of SIZE_MB random bytes in
# a folder copied to a bucket (file → bucket, PUT) and back into another folder (bucket → file, GET),
# read back and compared byte for byte, the whole command timed. The server: Ceph radosgw on loopback
# (scripts/start_radosgw.sh) whose one OSD is a memstore — the objects live in the OSD's RAM, not on
# this disk; the files on both ends are in this machine's page cache (written just before).
#   anneal   bench/s3_throughput.cc: one file after another; above 64 MB a multipart upload of 16 MB
#            parts on 4 threads; each GET one request.
#   s3cmd    one process for the folder (--recursive); 15 MB parts, one at a time.
#   aws      Debian's AWS CLI (/usr/bin/aws), one process for the folder (s3 cp --recursive), in its
#            two strongest configurations: its defaults (8 MB parts, 10 concurrent requests across
#            files and parts, downloads in parallel ranges) and anneal's (16 MB parts, 4 requests).
# ROUNDS rounds, interleaved; each side's best round. Ratios are against the stronger peer of each op.
# Usage: bench/s3_throughput.sh [BUILD]    (SIZE_MB, COUNT, ROUNDS from the environment)
# BENCH_SMOKE=1: SIZE_MB, COUNT, ROUNDS default to 2, 2, 1 instead of 96, 4, 2 (a check that the
# script still runs; the figures mean nothing, and no file reaches the multipart size).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build/release}
if [ "${BENCH_SMOKE:-0}" = 1 ]; then
  SIZE_MB=${SIZE_MB:-2} COUNT=${COUNT:-2} ROUNDS=${ROUNDS:-1}
else
  SIZE_MB=${SIZE_MB:-96} COUNT=${COUNT:-4} ROUNDS=${ROUNDS:-2}
fi
AWS=/usr/bin/aws
for t in s3cmd "$AWS" "$BUILD/bench/s3_throughput_anneal"; do
  command -v "$t" >/dev/null || { echo "s3_throughput: $t is missing: run scripts/setup.sh and build" >&2; exit 2; }
done
DIR=$(mktemp -d /tmp/anneal_s3bench.XXXXXX)
read -r RGW_PORT MON_PORT <<<"$(scripts/free_port.sh 2)"
# Every round's objects stay in the OSD's RAM (deletes free it only at radosgw's garbage collection).
export RADOSGW_MEMSTORE_MB=$(( ROUNDS * 4 * SIZE_MB * COUNT * 5 / 4 + 1024 ))
trap 'scripts/start_radosgw.sh --stop "$DIR/ceph" >/dev/null 2>&1; rm -rf "$DIR"' EXIT
eval "$(scripts/start_radosgw.sh "$DIR/ceph" $RGW_PORT $MON_PORT)"
EP=http://127.0.0.1:$RGW_PORT
S3CMD=(s3cmd --access_key="$AWS_ACCESS_KEY_ID" --secret_key="$AWS_SECRET_ACCESS_KEY" --host=127.0.0.1:$RGW_PORT
  --host-bucket=127.0.0.1:$RGW_PORT --no-ssl --region=us-east-1 -c /dev/null --no-progress)
"${S3CMD[@]}" mb s3://bench >/dev/null
aws_config() {  # $1 file, $2 part size, $3 concurrent requests ("" = the CLI's defaults)
  { echo "[default]"; echo "region = us-east-1"; echo "s3 ="; echo "  addressing_style = path"
    [ -z "$2" ] || { echo "  multipart_chunksize = $2"; echo "  max_concurrent_requests = $3"; echo "  multipart_threshold = 64MB"; }
  } >"$1"
}
aws_config "$DIR/aws_default.cfg" "" ""
aws_config "$DIR/aws_anneal.cfg" 16MB 4

mkdir -p "$DIR/src"
for i in $(seq 1 "$COUNT"); do head -c $((SIZE_MB * 1000000)) /dev/urandom >"$DIR/src/obj-$i"; done
# A fresh gateway's first write creates its bucket index and pools: done once here, untimed.
"${S3CMD[@]}" put "$DIR/src/obj-1" s3://bench/warmup >/dev/null && "${S3CMD[@]}" del s3://bench/warmup >/dev/null
sides=(anneal s3cmd aws_default aws_anneal)
copy() {  # $1 side, $2 put|get, $3 prefix, $4 out folder
  case $1 in
    anneal) "$BUILD/bench/s3_throughput_anneal" "$2" "s3://bench/$3" "$( [ "$2" = put ] && echo "$DIR/src" || echo "$4")" >/dev/null ;;
    s3cmd) if [ "$2" = put ]; then "${S3CMD[@]}" put --recursive "$DIR/src/" "s3://bench/$3/" >/dev/null
           else "${S3CMD[@]}" get --recursive "s3://bench/$3/" "$4/" >/dev/null; fi ;;
    aws_*) if [ "$2" = put ]; then AWS_CONFIG_FILE="$DIR/$1.cfg" $AWS --endpoint-url "$EP" s3 cp --recursive --only-show-errors "$DIR/src/" "s3://bench/$3/"
           else AWS_CONFIG_FILE="$DIR/$1.cfg" $AWS --endpoint-url "$EP" s3 cp --recursive --only-show-errors "s3://bench/$3/" "$4/"; fi ;;
  esac
}
now() { date +%s.%N; }
declare -A BEST
for r in $(seq 1 "$ROUNDS"); do
  for s in "${sides[@]}"; do
    out="$DIR/back"; rm -rf "$out"; mkdir -p "$out"
    t0=$(now); copy "$s" put "$s-$r" "$out"; t1=$(now); copy "$s" get "$s-$r" "$out"; t2=$(now)
    for i in $(seq 1 "$COUNT"); do
      cmp -s "$DIR/src/obj-$i" "$out/obj-$i" || { echo "s3_throughput: $s read back different bytes for obj-$i" >&2; exit 1; }
    done
    for op in put get; do
      [ $op = put ] && mbs=$(echo "$SIZE_MB * $COUNT / ($t1 - $t0)" | bc -l) || mbs=$(echo "$SIZE_MB * $COUNT / ($t2 - $t1)" | bc -l)
      [ -n "${BEST[$s$op]:-}" ] && (( $(echo "${BEST[$s$op]} >= $mbs" | bc -l) )) || BEST[$s$op]=$mbs
    done
  done
done
printf "%-5s %12s %12s %17s %16s %13s\n" "" "anneal MB/s" "s3cmd MB/s" "aws default MB/s" "aws 16MBx4 MB/s" "vs stronger"
result="RESULT s3_throughput size_mb=$SIZE_MB count=$COUNT rounds=$ROUNDS"
for op in put get; do
  strong=s3cmd
  for s in aws_default aws_anneal; do (( $(echo "${BEST[$s$op]} > ${BEST[$strong$op]}" | bc -l) )) && strong=$s; done
  ratio=$(echo "${BEST[anneal$op]} / ${BEST[$strong$op]}" | bc -l)
  printf "%-5s %12.1f %12.1f %17.1f %16.1f %8.2f (%s)\n" "${op^^}" "${BEST[anneal$op]}" "${BEST[s3cmd$op]}" \
    "${BEST[aws_default$op]}" "${BEST[aws_anneal$op]}" "$ratio" "$strong"
  result+=" anneal_$op=$(printf %.1f "${BEST[anneal$op]}") s3cmd_$op=$(printf %.1f "${BEST[s3cmd$op]}")"
  result+=" aws_default_$op=$(printf %.1f "${BEST[aws_default$op]}") aws_anneal_$op=$(printf %.1f "${BEST[aws_anneal$op]}")"
  result+=" stronger_$op=$strong ${op}_ratio=$(printf %.2f "$ratio")"
done
echo "($COUNT files of $SIZE_MB MB, file → bucket → file, radosgw on loopback with a memstore OSD; best of $ROUNDS)"
echo "$result" >&2
