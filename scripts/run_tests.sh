#!/usr/bin/env bash
# Runs every test tier (DESIGN.md) and prints each tier's time:
#   unit        gtest, release build
#   unit-asan   the same tests under AddressSanitizer + UBSan
#   e2e         the anneal binary driven as users drive it
#   peers       real oracles (tiktoken through node)
# Ends with one line "N passed, M failed, K skipped" over all tiers (a skipped test, such as a GPU test
# on a machine without a GPU, is never counted as passed); exits non-zero if any test failed.
# Only a test labelled needs-gpu (hardware this machine may lack) may skip: `make test` installs
# every peer, so any other skip (a missing peer, a setup problem) fails the run, named — unless
# ANNEAL_ALLOW_SKIPS=1 (a developer's machine without some peer). A test labelled needs-cuda-toolkit
# (unit.cuda_build) may skip too, unless ANNEAL_REQUIRE_CUDA=1 (.ci/run sets it: CI's machines get
# CUDA 13 from scripts/setup.sh, so a build without the CUDA backend fails CI).
# A part of a test that cannot run here (skip_part in tests/e2e/lib.sh: a CUDA check of a build without
# the plugin) is listed and counted per tier. At the end: the set-up and build steps' times (from
# build/step_times.tsv, scripts/timed.sh), each tier's, and the 10 slowest tests.
# TIERS="unit e2e" scripts/run_tests.sh runs a subset.
set -uo pipefail
cd "$(dirname "$0")/.."
TIERS=${TIERS:-"unit unit-asan e2e peers"}
total_pass=0 total_fail=0 total_skip=0 summary=() failures=()
times=$(mktemp) parts=$(mktemp)
trap 'rm -f "$times" "$parts"' EXIT
for tier in $TIERS; do
  dir=build/release label=$tier
  if [ "$tier" = unit-asan ]; then dir=build/asan; label=unit; fi
  start=$EPOCHREALTIME
  log=$(mktemp)
  : >"$parts"
  ANNEAL_SKIP_LOG=$parts ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$dir" -L "^${label}\$" -j2 --output-on-failure --timeout 900 >"$log" 2>&1
  rc=$?
  secs=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}')
  # ctest's summary line: "100% tests passed, 0 tests failed out of 59"
  line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -1)
  n=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$line")
  f=$(sed -E 's/.*passed, ([0-9]+) tests? failed.*/\1/' <<<"$line")
  if [ -z "$line" ]; then n=0; f=1; cat "$log"; echo "tier $tier: ctest ran no test (rc=$rc)"; fi
  [ "$rc" -ne 0 ] && [ "$f" = 0 ] && f=1
  if [ "$f" != 0 ]; then
    grep -vE '^\s+(Start|[0-9]+/[0-9]+ Test .* Passed)' "$log" | tail -80
    # The failing checks themselves (e2e's "FAIL ...", gtest's "[  FAILED  ] ..."), kept for the end:
    # a CI log that shows only its last lines still says what failed.
    while read -r l; do failures+=("$tier: ${l:0:300}"); done < <(grep -E '^(FAIL |\[  FAILED  \] [A-Za-z])' "$log" | head -6)
  fi
  # "10/18 Test #315: e2e.control_plane ......   Passed   89.07 sec" -> "89.07 tier e2e.control_plane"
  sed -nE "s/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) .* ([0-9.]+) sec\$/\2 $tier \1/p" "$log" >>"$times"
  k=$(grep -cE '^\s+[0-9]+ - .* \(Skipped\)$' "$log")
  # A skip of a test not labelled needs-gpu is a failure (see the header).
  hw=$(ctest --test-dir "$dir" -N -L needs-gpu | sed -nE 's/^ *Test +#[0-9]+: (.*)$/\1/p')
  gpu_skips=0
  tk=$(ctest --test-dir "$dir" -N -L needs-cuda-toolkit | sed -nE 's/^ *Test +#[0-9]+: (.*)$/\1/p')
  while read -r name; do
    [ -z "$name" ] && continue
    if grep -qxF -- "$name" <<<"$tk"; then
      if [ "${ANNEAL_REQUIRE_CUDA:-0}" = 1 ]; then
        failures+=("$tier: $name was skipped: this build has no CUDA backend, which ANNEAL_REQUIRE_CUDA=1 (CI) requires: scripts/setup.sh installs CUDA 13 into tools/cuda")
        echo "${failures[-1]}"; f=$((f + 1)); k=$((k - 1))
      else echo "tier $tier: $name skipped: no CUDA toolkit in this build, so the CUDA kernels and anneal_cuda_tests were not built (scripts/setup.sh installs CUDA 13)"; fi
    elif grep -qxF -- "$name" <<<"$hw"; then gpu_skips=$((gpu_skips + 1))
    else
      if [ "${ANNEAL_ALLOW_SKIPS:-0}" = 1 ]; then echo "tier $tier: $name skipped (allowed: ANNEAL_ALLOW_SKIPS=1)"
      else echo "tier $tier: $name was skipped but needs no missing hardware: a setup failure (scripts/setup.sh installs every peer)"; f=$((f + 1)); k=$((k - 1)); fi
    fi
  done < <(sed -nE 's/^\s+[0-9]+ - (.*) \(Skipped\)$/\1/p' "$log")
  [ "$gpu_skips" -gt 0 ] && echo "tier $tier: $gpu_skips test(s) labelled needs-gpu skipped: this machine has no GPU"
  np=$(wc -l <"$parts")
  if [ "$np" -gt 0 ]; then echo "tier $tier: $np part(s) of passing tests skipped:"; sed 's/^/  skip /' "$parts"; fi
  total_pass=$((total_pass + n - f - k)); total_fail=$((total_fail + f)); total_skip=$((total_skip + k))
  summary+=("$(printf 'tier %-10s %4d tests, %2d failed, %2d skipped, %7.1f s%s' "$tier" "$n" "$f" "$k" "$secs" \
    "$([ "$np" -gt 0 ] && echo ", $np part(s) of tests skipped")")")
  echo "${summary[-1]}"
  rm -f "$log"
done
echo "---"
if [ -f build/step_times.tsv ]; then
  echo "set-up and build steps of the last make (scripts/timed.sh):"
  awk -F'\t' '{printf "  %-14s %7.1f s\n", $1, $2}' build/step_times.tsv
fi
echo "the 10 slowest tests:"
sort -rn "$times" | head -10 | awk '{printf "  %7.1f s  %-10s %s\n", $1, $2, $3}'
printf '%s\n' "${summary[@]}"
[ ${#failures[@]} -eq 0 ] || printf 'failed check: %s\n' "${failures[@]}"
echo "$total_pass passed, $total_fail failed, $total_skip skipped"
[ "$total_fail" -eq 0 ]
