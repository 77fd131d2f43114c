# Sourced by the scripts that run GoogleTest binaries (tests/peers/*.sh).
# gtest_run BIN FILTER [ARGS...]: runs BIN's tests matching --gtest_filter=FILTER and fails, naming
# why, when the filter selects no test (GoogleTest itself exits 0 then) or when a selected test
# skips (a skip inside a passing script would be counted as passed). Exits like BIN otherwise.
gtest_run() {
  local bin=$1 filter=$2 n out rc
  shift 2
  n=$("$bin" --gtest_filter="$filter" --gtest_list_tests | grep -c '^  ')
  if [ "$n" -eq 0 ]; then
    echo "FAIL --gtest_filter='$filter' selects no test in $bin"
    return 1
  fi
  out=$(mktemp /tmp/anneal_gtest.XXXXXX)
  "$bin" --gtest_filter="$filter" "$@" 2>&1 | tee "$out"
  rc=${PIPESTATUS[0]}
  if grep -q '^\[  SKIPPED \] [A-Z]' "$out"; then
    echo "FAIL selected tests skipped (set up what they need, or leave them out of the filter): $(grep '^\[  SKIPPED \] [A-Z]' "$out" | sed 's/\[  SKIPPED \] //' | tr '\n' ' ')"
    rc=1
  fi
  rm -f "$out"
  echo "gtest_run: $n tests selected by '$filter', exit $rc"
  return "$rc"
}
