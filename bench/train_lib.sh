# Shared by the training benchmarks (the bench scripts that source it): sourced after `set -euo
# pipefail`. Sets ANNEAL (first argument or the release build) and DATA (a prepared dataset, out/kjv
# by default: `make run` prepares it), and write_config writes the YAML on standard input, with
# $DATA substituted, to a temporary file named by $cfg (removed on exit). SMOKE is 1 under
# BENCH_SMOKE=1 (every benchmark's smoke mode: the same code paths and RESULT lines at tiny sizes, one
# round; the figures mean nothing), else 0: each script picks its own sizes with it. Smoke mode also
# exports OMP_WAIT_POLICY=PASSIVE (unless set): on a busy machine, OpenMP threads spinning for cores
# other jobs hold make tiny steps take seconds.
# shellcheck shell=bash disable=SC2034  # ANNEAL and SMOKE are for the scripts that source this
ANNEAL=$(readlink -f "${1:-build/release/src/anneal}")  # absolute: scripts may cd
DATA=$(readlink -f "${DATA:-out/kjv}")
SMOKE=0
if [ "${BENCH_SMOKE:-0}" = 1 ]; then SMOKE=1; export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}; fi
[ -f "$DATA/dataset.json" ] || { echo "needs a prepared dataset in $DATA (make run prepares out/kjv)"; exit 2; }
cfg=$(mktemp --suffix=.yaml)
trap 'rm -f "$cfg"' EXIT
write_config() { cat >"$cfg"; }
# logged CMD...: runs CMD with its standard error merged into its output and prints that output; when
# CMD fails, prints its last 40 lines and the command to standard error and exits with CMD's status
# (inside $(...) that ends the substitution, and set -e with pipefail then ends the script), so a
# benchmark that fails says why in its results file instead of only its exit status.
logged() {
  local out rc
  out=$("$@" 2>&1) && { printf '%s\n' "$out"; return 0; }
  rc=$?
  { printf '%s\n' "$out" | tail -40; echo "failed (exit $rc): $*"; } >&2
  exit $rc
}
