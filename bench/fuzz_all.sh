#!/usr/bin/env bash
# bench/fuzz_all.sh SECONDS [NAME...] — fuzz harnesses (bench/fuzz.sh), each for SECONDS, two at a
# time (one per core; the next starts as soon as a core frees): every harness by default, or the
# NAMEs. `bench/run_all.sh build/release/src/anneal fuzz` runs them all for FUZZ_SECONDS (default
# 120) into bench/results/fuzz.md; `... fuzz_long` runs the five most exposed (job specs, API
# requests, S3's XML, safetensors, token-shard and dataset headers) for FUZZ_LONG_SECONDS (default
# 600) into bench/results/fuzz_long.md. Neither is part of plain `make bench`: they need clang.
# Exit 1 when a harness found something.
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: bench/fuzz_all.sh SECONDS [NAME...]" >&2; exit 2; }
SECS=$1
shift
ANNEAL_SETUP_QUIET=1 scripts/setup.sh --fuzz || exit 2
[ -f build/fuzz/build.ninja ] || cmake --preset fuzz >/dev/null || exit 2
names=("$@")
[ ${#names[@]} -gt 0 ] || mapfile -t names < <(bash bench/fuzz.sh --list)
nice ninja -C build/fuzz -j"$(nproc)" "${names[@]/#/fuzz_}" >/dev/null || { echo "fuzz_all: the fuzz build failed" >&2; exit 2; }
mkdir -p build/fuzz/logs
export SECS
printf '%s\n' "${names[@]}" | xargs -P 2 -I{} bash -c \
  'FUZZ_NO_BUILD=1 bash bench/fuzz.sh {} "$SECS" > "build/fuzz/logs/{}.out" 2>&1'  # built above, once
rc=$?
for n in "${names[@]}"; do cat "build/fuzz/logs/$n.out"; done
[ $rc -eq 0 ] || exit 1
