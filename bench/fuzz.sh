#!/usr/bin/env bash
# bench/fuzz.sh NAME SECONDS [JOBS] — runs the libFuzzer harness NAME (tests/fuzz/NAME_fuzz.cc) for
# SECONDS of wall time on JOBS processes (default 1; one per core for a longer run), and prints its
# executions, coverage and findings. Issue 37.
#   - Sets up clang's libFuzzer (scripts/setup.sh --fuzz) and builds build/fuzz's fuzz_NAME (cmake
#     --preset fuzz: clang, -fsanitize=fuzzer,address,undefined).
#   - The working corpus build/fuzz/corpus/NAME is kept between runs and starts from the committed
#     seeds (tests/fuzz/corpus/NAME); new inputs stay there (merge the useful ones into the seeds by
#     hand: `fuzz_NAME -merge=1 tests/fuzz/corpus/NAME build/fuzz/corpus/NAME`).
#   - A crash, hang (-timeout=10 s per input), leak or sanitizer report is written to
#     build/fuzz/findings/NAME/ (crash-*, timeout-*, leak-*, oom-*); each is fixed at its cause and
#     added to tests/fuzz/corpus/NAME, which the unit tier replays (fuzz.NAME).
#   bench/fuzz.sh --list          the harnesses
# Exit: 0 no finding, 1 findings (named), 2 bad usage or a build failure.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--list" ]; then ls tests/fuzz/*_fuzz.cc | sed 's|.*/||; s|_fuzz.cc$||'; exit 0; fi
if [ $# -lt 2 ]; then echo "usage: bench/fuzz.sh NAME SECONDS [JOBS] | --list" >&2; exit 2; fi
NAME=$1 SECONDS_=$2 JOBS=${3:-1}
[ -f "tests/fuzz/${NAME}_fuzz.cc" ] || { echo "bench/fuzz.sh: no harness '$NAME' (bench/fuzz.sh --list)" >&2; exit 2; }
ANNEAL_SETUP_QUIET=1 scripts/setup.sh --fuzz || exit 2
[ -f build/fuzz/build.ninja ] || cmake --preset fuzz >/dev/null || exit 2
[ "${FUZZ_NO_BUILD:-0}" = 1 ] || nice ninja -C build/fuzz -j"$(nproc)" "fuzz_$NAME" >/dev/null || { echo "bench/fuzz.sh: the fuzz build failed" >&2; exit 2; }
CORPUS=build/fuzz/corpus/$NAME FINDINGS=build/fuzz/findings/$NAME LOG=build/fuzz/logs/$NAME
mkdir -p "$CORPUS" "$FINDINGS" "$LOG"
before=$(ls "$FINDINGS" | wc -l)
# Sanitizer reports end the run with the input saved; leaks are reported (ASan's LeakSanitizer).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
extra=()
[ "$JOBS" -gt 1 ] && extra=(-fork="$JOBS" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
start=$(date +%s)
"build/fuzz/tests/fuzz_$NAME" "$CORPUS" "tests/fuzz/corpus/$NAME" -max_total_time="$SECONDS_" -timeout=10 \
  -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 -artifact_prefix="$FINDINGS/" "${extra[@]}" \
  >"$LOG/last.log" 2>&1
rc=$?
wall=$(( $(date +%s) - start ))
# The last status line (#N ... cov: C ft: F corp: K) and the final stats.
status=$(grep -E '^#[0-9]+' "$LOG/last.log" | tail -1)
execs=$(grep -oE 'stat::number_of_executed_units: [0-9]+' "$LOG/last.log" | awk '{s+=$2} END {print s+0}')
[ "$execs" -gt 0 ] || execs=$(echo "$status" | grep -oE '^#[0-9]+' | tr -d '#')
cov=$(echo "$status" | grep -oE 'cov: [0-9]+' | awk '{print $2}')
ft=$(echo "$status" | grep -oE 'ft: [0-9]+' | awk '{print $2}')
corp=$(ls "$CORPUS" | wc -l)
after=$(ls "$FINDINGS" | wc -l)
new=$(( after - before ))
echo "$NAME: ${wall} s on $JOBS process(es), ${execs:-0} executions, coverage ${cov:-?} edges, ${ft:-?} features, corpus $corp inputs, findings $new new ($after kept in $FINDINGS)"
echo "RESULT harness=$NAME seconds=$wall jobs=$JOBS execs=${execs:-0} execs_per_s=$(( ${execs:-0} / (wall > 0 ? wall : 1) )) cov=${cov:-0} features=${ft:-0} corpus=$corp findings=$new"
if [ "$new" -gt 0 ] || { [ "$rc" -ne 0 ] && [ "$JOBS" -eq 1 ]; }; then
  ls -t "$FINDINGS" | head -n "$(( new > 0 ? new : 1 ))" | sed "s|^|  finding: $FINDINGS/|"
  grep -m3 -E 'ERROR: (AddressSanitizer|libFuzzer|LeakSanitizer)|runtime error|fuzz property failed|terminate called' "$LOG/last.log" | sed 's/^/  /'
  echo "  log: $LOG/last.log"
  exit 1
fi
exit 0
