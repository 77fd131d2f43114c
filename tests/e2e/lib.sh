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
