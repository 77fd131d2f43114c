#!/bin/bash
# Hierarchical checkpoint upload against every rank uploading, to a real S3 server (Ceph radosgw on
# loopback), in one run: 2 data-parallel ranks with ZeRO-1 on this instance (each writes its own
# optimizer shard; rank 0 also the parameters), synchronous saves every 2 steps of a 4-layer C=768
# model (~800 MB per checkpoint). With train.checkpoint_hierarchical=true rank 1 hands its file to
# local rank 0 through /dev/shm and only rank 0 talks to radosgw. Prints rank 0's time to write and
# commit each checkpoint (mean of the saves at steps 2 and 4) and the time training was blocked.
# Each variant gets a freshly started radosgw, its one memstore OSD (objects in RAM) sized for that
# variant's two checkpoints (RADOSGW_MEMSTORE_MB): radosgw frees deleted objects only at garbage
# collection, hours later, and a full OSD stalls the gateway for minutes, which would penalise
# whichever variant ran second on a shared one.
# BENCH_SMOKE=1: the same saves of a 2-layer C=32 model at T=16 (~20 MB per checkpoint), both variants
# on one radosgw sized for both (a check that the script still runs; the figures mean nothing).
set -euo pipefail
source "$(dirname "$0")/train_lib.sh"
DIR=$(mktemp -d /tmp/anneal_ckpth.XXXXXX)
trap 'scripts/start_radosgw.sh --stop "$DIR/ceph" >/dev/null 2>&1; rm -rf "$DIR" "$cfg"' EXIT
read -ra VARIANTS <<<"${HIER:-false true}"
# MB one checkpoint writes (parameters and Adam moments, 12 bytes a parameter: 67.0M of them here,
# 1.63M in smoke), and how many variants one gateway serves.
MODEL="n_layer: 4, n_head: 12, n_embd: 768" T=32 CKPT_MB=810 PER_GATEWAY=1
if [ "$SMOKE" = 1 ]; then  # SMOKE: bench/train_lib.sh
  MODEL="n_layer: 2, n_head: 2, n_embd: 32" T=16 CKPT_MB=20 PER_GATEWAY=${#VARIANTS[@]}
fi
# Two saves (steps 2 and 4) per variant, a quarter for the OSD's own overhead, and 1 GB for radosgw's
# pools and indexes.
export RADOSGW_MEMSTORE_MB=$(( PER_GATEWAY * 2 * CKPT_MB * 5 / 4 + 1024 ))
start_rgw() {
  scripts/start_radosgw.sh --stop "$DIR/ceph" >/dev/null 2>&1 || true
  read -r RGW_PORT MON_PORT <<<"$(scripts/free_port.sh 2)"
  eval "$(scripts/start_radosgw.sh "$DIR/ceph" $RGW_PORT $MON_PORT)"
  s3cmd --access_key=$AWS_ACCESS_KEY_ID --secret_key=$AWS_SECRET_ACCESS_KEY --host=127.0.0.1:$RGW_PORT \
    --host-bucket=127.0.0.1:$RGW_PORT --no-ssl --region=us-east-1 -c /dev/null mb s3://ckpt >/dev/null
}
write_config <<YAML
model: {vocab_size: 50257, max_seq_len: $T, $MODEL}
data: {dir: $DATA, seq_len: $T, batch_size: 1, seed: 1}
train: {steps: 4, checkpoint_every: 2, checkpoint_async: false, log_every: 1, eval_every: 0, eval_batches: 1,
        peak_gflops: 100, resume: none, threads: 1}
dist: {zero: 1}
YAML
run() {  # $1 = hierarchical true|false (the whole log also goes to $DIR/run-$1.log)
  [ "$SMOKE" = 1 ] || start_rgw
  OMP_NUM_THREADS=1 "$ANNEAL" launch --nproc-per-node 2 -- "$ANNEAL" train --config "$cfg" \
    --set train.checkpoint_dir="s3://ckpt/h-$1" --set train.checkpoint_hierarchical=$1 2>&1 | tee "$DIR/run-$1.log" |
    sed "s/^\[rank 0\] //" | grep -E "^checkpoint s3://ckpt/h-$1/step-0000000[24] committed|error" || true
}
[ "$SMOKE" != 1 ] || start_rgw  # one gateway for every variant
printf "%-36s %14s %14s\n" "" "write+commit s" "blocked ms"
for h in "${VARIANTS[@]}"; do
  out=$(run $h)
  w=$(sed -E 's/.*written in ([0-9.]+) s.*/\1/' <<<"$out" | awk '{s+=$1} END {printf "%.2f", s/NR}')
  b=$(sed -E 's/.*blocked ([0-9]+) ms.*/\1/' <<<"$out" | awk '{s+=$1} END {printf "%.0f", s/NR}')
  label="every rank uploads"; [ $h = true ] && label="node leader uploads (hierarchical)"
  printf "%-36s %14s %14s\n" "$label" "$w" "$b"
  echo "RESULT ckpt_hierarchical hierarchical=$h write_commit_s=$w blocked_ms=$b" >&2
done
