# Helpers for the e2e tests: each test script sources this, calls check/expect_exit, and ends with
# finish (which prints "N passed, M failed" and sets the exit code).
set -uo pipefail
ANNEAL=${1:-build/release/src/anneal}
ANNEAL=$(readlink -f "$ANNEAL")
TMP=$(mktemp -d /tmp/anneal_e2e.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
PASS=0 FAIL=0

ok() { PASS=$((PASS + 1)); echo "ok   $*"; }
bad() { FAIL=$((FAIL + 1)); echo "FAIL $*"; }
# check NAME COMMAND...: passes when the command succeeds.
check() { local name=$1; shift; if "$@"; then ok "$name"; else bad "$name"; fi; }
# expect_exit NAME CODE PATTERN COMMAND...: the command exits with CODE and its stderr matches PATTERN.
expect_exit() {
  local name=$1 code=$2 pat=$3; shift 3
  "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  if [ "$rc" -eq "$code" ] && grep -qE -- "$pat" "$TMP/err"; then ok "$name"
  else bad "$name (exit $rc, want $code; stderr: $(head -c 400 "$TMP/err"))"; fi
}
finish() { echo "$PASS passed, $FAIL failed"; [ "$FAIL" -eq 0 ]; }
# skip REASON: the test cannot run here. Exit 77, which tests/CMakeLists.txt declares as the test's
# SKIP_RETURN_CODE, so ctest and scripts/run_tests.sh count it as skipped, never as passed.
SKIP_CODE=77
skip() { echo "SKIP: $*"; exit "$SKIP_CODE"; }

# Golden runs (tests/e2e/golden/runs.txt): a run's per-step losses (hex floats, as logged) and its
# final state hash, recorded once at a known commit and compared by every later commit bit for bit.
# OpenBLAS picks its sgemm kernel by CPU; the golden runs pin it (and every thread count) so the
# file holds on AVX2 and AVX-512 machines alike. GOLDEN_RECORD=1 appends instead of comparing.
GOLDEN=$(readlink -f "$(dirname "${BASH_SOURCE[0]}")")/golden/runs.txt
export OPENBLAS_CORETYPE=Haswell
golden_line() {  # NAME LOG -> "NAME losses=l1,l2,... hash=H"
  local l h
  l=$(grep -E '^(\[[^]]*\] )?step +[0-9]+/' "$2" | sed -E 's/.*step +([0-9]+)\/.*\((0x[^)]*)\).*/\1:\2/' | sort -n -u | paste -sd, -)
  h=$(sed -nE 's/.*state hash.*: ([0-9a-f]+)$/\1/p' "$2" | tail -1)
  echo "$1 losses=${l:-none} hash=${h:-none}"
}
golden_check() {  # NAME LOG
  local got want
  got=$(golden_line "$1" "$2")
  if [ "${GOLDEN_RECORD:-0}" = 1 ]; then
    { [ -f "$GOLDEN" ] && awk -v n="$1" '$1 != n' "$GOLDEN"; } >"$GOLDEN.tmp"; echo "$got" >>"$GOLDEN.tmp"; mv "$GOLDEN.tmp" "$GOLDEN"
    ok "golden $1 recorded"; return
  fi
  want=$(awk -v n="$1" '$1 == n' "$GOLDEN" | head -1)
  if [ -z "$want" ]; then bad "golden $1: no recorded line in $GOLDEN"
  elif [ "$got" = "$want" ]; then ok "golden $1 identical (${got##* })"
  else bad "golden $1 differs: got '$got', want '$want'"; fi
}

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
