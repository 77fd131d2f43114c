#!/usr/bin/env bash
# bench/fuzz_all.sh — every fuzz harness (bench/fuzz.sh) one after another, two at a time (one per
# core): each for FUZZ_SECONDS (default 120), the five most exposed (job specs, API requests, S3's
# XML, safetensors headers, token-shard and dataset headers) for FUZZ_LONG_SECONDS (default 600).
# `bench/run_all.sh build/release/src/anneal fuzz` writes its output to bench/results/fuzz.md (not
# part of plain `make bench`: it needs clang and takes half an hour). Exit 1 when a harness found
# something.
set -uo pipefail
cd "$(dirname "$0")/.."
SHORT=${FUZZ_SECONDS:-120} LONG=${FUZZ_LONG_SECONDS:-600}
LONG_ONES=" job_spec api s3_xml safetensors data_headers "
ANNEAL_SETUP_QUIET=1 scripts/setup.sh --fuzz || exit 2
[ -f build/fuzz/build.ninja ] || cmake --preset fuzz >/dev/null || exit 2
mapfile -t names < <(bash bench/fuzz.sh --list)
nice ninja -C build/fuzz -j"$(nproc)" "${names[@]/#/fuzz_}" >/dev/null || { echo "fuzz_all: the fuzz build failed" >&2; exit 2; }
rc=0
run() {  # NAME: its output, printed whole when it ends
  local secs=$SHORT
  [[ $LONG_ONES == *" $1 "* ]] && secs=$LONG
  FUZZ_NO_BUILD=1 bash bench/fuzz.sh "$1" "$secs" > "build/fuzz/logs/$1.out" 2>&1  # built above, once
}
mkdir -p build/fuzz/logs
for ((i = 0; i < ${#names[@]}; i += 2)); do
  run "${names[i]}" & a=$!
  b=""
  if (( i + 1 < ${#names[@]} )); then run "${names[i + 1]}" & b=$!; fi
  wait $a || rc=1
  [ -z "$b" ] || wait $b || rc=1
  cat "build/fuzz/logs/${names[i]}.out"
  (( i + 1 < ${#names[@]} )) && cat "build/fuzz/logs/${names[i + 1]}.out"
done
exit $rc
