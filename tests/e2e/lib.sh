# Helpers for the e2e tests: each test script sources this, calls check/expect_exit, and ends with
# finish (which prints "N passed, M failed" and sets the exit code).
set -uo pipefail
ANNEAL=${1:-build/release/src/anneal}
ANNEAL=$(readlink -f "$ANNEAL")
# The test's folder holds files its jobs name by path (configs, datasets, scripts): a job's sandbox
# (docs/security.md) runs it as a uid of its own with a /tmp of its own, so the folder is outside /tmp
# and others may pass through it (0711: reach a file by its name, list nothing). The same in bench/.
TMP=$(mktemp -d "${ANNEAL_TEST_TMP:-/var/tmp}/anneal_e2e.XXXXXX")
chmod 711 "$TMP"
trap 'rm -rf "$TMP"' EXIT
# `--local` commands keep their store under $ANNEAL_HOME/local: the test's own, never the user's home.
export ANNEAL_HOME="$TMP/home"
PASS=0 FAIL=0

ok() { PASS=$((PASS + 1)); echo "ok   $*"; }
bad() { FAIL=$((FAIL + 1)); echo "FAIL $*"; }
# check NAME COMMAND...: passes when the command succeeds; returns its status, so `check … || diagnostics` works.
check() { local name=$1; shift; if "$@"; then ok "$name"; else bad "$name"; return 1; fi; }
# expect_exit NAME CODE PATTERN COMMAND...: the command exits with CODE and its stderr matches PATTERN.
expect_exit() {
  local name=$1 code=$2 pat=$3; shift 3
  "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  if [ "$rc" -eq "$code" ] && grep -qE -- "$pat" "$TMP/err"; then ok "$name"
  else bad "$name (exit $rc, want $code; stderr: $(head -c 400 "$TMP/err"))"; fi
}
SKIPS=0
# skip_part WHAT: one part of a test that cannot run here (the rest of the test runs). Named on its
# own line, counted in finish's line, and appended to $ANNEAL_SKIP_LOG, where scripts/run_tests.sh
# lists and counts every skipped part of a tier (a passing test's output is not shown otherwise).
skip_part() {
  SKIPS=$((SKIPS + 1)); echo "skip $*"
  if [ -n "${ANNEAL_SKIP_LOG:-}" ]; then echo "$(basename "$0" .sh): $*" >>"$ANNEAL_SKIP_LOG"; fi
}
# have_cuda_plugin BUILD WHAT: true when BUILD has the CUDA plugin; otherwise WHAT is a skipped part,
# or a failed check under ANNEAL_REQUIRE_CUDA=1 (CI, whose machines get the toolkit from setup).
have_cuda_plugin() {
  [ -f "$1/src/libanneal_cuda.so" ] && return 0
  local why="this build has no CUDA plugin ($1/src/libanneal_cuda.so): CMake found no CUDA toolkit (scripts/setup.sh installs it into tools/cuda)"
  if [ "${ANNEAL_REQUIRE_CUDA:-0}" = 1 ]; then bad "$2: $why, which ANNEAL_REQUIRE_CUDA=1 requires"; else skip_part "$2: $why"; fi
  return 1
}
# field ID KEY: a field of `anneal describe ID --json` on $URL; wait_status ID STATUS SECONDS.
field() { "$ANNEAL" describe "$1" --server "$URL" --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$2"; }
wait_status() {
  for _ in $(seq 1 $(($3 * 10))); do
    [ "$(field "$1" status 2>/dev/null)" = "$2" ] && return 0
    sleep 0.1
  done
  return 1
}
# Every rank's measured memory peak (the allocator's high-water mark in step 1) within 0.5 % of its
# formula (parallel/memory_plan.h), in the logs given; says how many ranks it compared.
memory_formula_holds() {
  grep -hoE 'memory of rank [0-9]+ .*formula [0-9.]+ MB \([+-][0-9.]+%\)' "$@" |
    sed -E 's/.*\(([+-][0-9.]+)%\)$/\1/' |
    awk '{ n++; d = $1 < 0 ? -$1 : $1; if (d > 0.5) bad++ } END { print n " ranks"; exit !(n > 0 && !bad) }'
}
finish() { echo "$PASS passed, $FAIL failed, $SKIPS skipped"; [ "$FAIL" -eq 0 ]; }
# skip REASON: the test cannot run here. Exit 77, which tests/CMakeLists.txt declares as the test's
# SKIP_RETURN_CODE, so ctest and scripts/run_tests.sh count it as skipped, never as passed.
SKIP_CODE=77
skip() { echo "SKIP: $*"; exit "$SKIP_CODE"; }

# Golden runs: tests/e2e/golden_lib.sh.
source "$(dirname "${BASH_SOURCE[0]}")/golden_lib.sh"

# fixture_config DATASET: the config of the golden fixture run (1 layer, C=8), whose step-2 checkpoint
# is kept in tests/e2e/golden/fixture (golden_test.sh) and, trained on a GPU, gpu_fixture
# (gpu_checkpoint_test.sh; bench/gpu/device_check.sh writes the same as JSON for cuda).
# job_config DATASET STEPS CHECKPOINT_EVERY: the 2-layer C=32 trainer config the control-plane fault
# tests run as jobs (control_faults, peers/slurm): small enough for 2 ranks on 2 cores, long enough to
# be interrupted mid-run; synchronous checkpoints, resumed automatically.
job_config() {
  cat <<YAML
model: {vocab_size: 50257, max_seq_len: 32, n_layer: 2, n_head: 2, n_embd: 32}
data: {dir: $1, seq_len: 32, batch_size: 4, seed: 7}
optim: {lr: 3.0e-3, warmup_steps: 5}
train: {steps: $2, log_every: 1, eval_every: 0, eval_batches: 2, checkpoint_every: $3, resume: auto, seed: 99,
        checkpoint_async: false}
YAML
}
fixture_config() {
  cat <<YAML
model: {vocab_size: 50257, max_seq_len: 16, n_layer: 1, n_head: 2, n_embd: 8}
data: {dir: $1, seq_len: 16, batch_size: 2, seed: 5}
optim: {lr: 1.0e-2, warmup_steps: 1}
train: {steps: 4, log_every: 1, eval_every: 0, checkpoint_every: 2, seed: 21, resume: auto, threads: 1, peak_gflops: 100}
YAML
}
