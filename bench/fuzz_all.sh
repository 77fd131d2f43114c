#!/usr/bin/env bash
# bench/fuzz_all.sh — every fuzz harness (bench/fuzz.sh), two at a time (one per core): each for FUZZ_SECONDS (default 120), the five most exposed (job specs, API requests, S3's
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
mkdir -p build/fuzz/logs
# Two at a time (xargs -P 2), the long ones first, each next one starting when a core frees.
order=()
for n in "${names[@]}"; do [[ $LONG_ONES == *" $n "* ]] && order+=("$n"); done
for n in "${names[@]}"; do [[ $LONG_ONES == *" $n "* ]] || order+=("$n"); done
export SHORT LONG LONG_ONES
printf '%s\n' "${order[@]}" | xargs -P 2 -I{} bash -c '
  secs=$SHORT; [[ $LONG_ONES == *" {} "* ]] && secs=$LONG
  FUZZ_NO_BUILD=1 bash bench/fuzz.sh {} "$secs" > "build/fuzz/logs/{}.out" 2>&1'
rc=$?
for n in "${order[@]}"; do cat "build/fuzz/logs/$n.out"; done
[ $rc -eq 0 ] || exit 1
exit 0
