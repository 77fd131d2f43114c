#!/usr/bin/env bash
# The long chaos soak (outside CI): bench/chaos.sh [ANNEAL] [SEED] [MINUTES] — tests/chaos/soak.sh
# for MINUTES (default 30) minutes of faults drawn from SEED, printing its event table (every event
# injected, when it was met or detected, how long recovery took), the invariants that failed (none,
# or it exits 1) and a RESULT line. bench/run_all.sh chaos writes it to bench/results/chaos.md.
set -euo pipefail
cd "$(dirname "$0")/.."
ANNEAL=$(readlink -f "${1:-build/release/src/anneal}")
SEED=${2:-20261207}
MINUTES=${3:-30}
report=$(mktemp)
trap 'rm -f "$report"' EXIT
rc=0
bash tests/chaos/soak.sh "$SEED" "$MINUTES" "$ANNEAL" --report "$report" --memstore-mb 4096 || rc=$?
echo
cat "$report"
# The summary's figures: "seed S, M min: N events injected (K found nothing to hit), J jobs, R steps re-done, X line(s) ..., F invariant(s) failed"
head -1 "$report" | sed -E 's/^seed ([0-9]+), ([0-9.]+) min: ([0-9]+) events injected \(([0-9]+) found nothing to hit\), ([0-9]+) jobs, ([0-9]+) steps re-done, ([0-9]+) line.*, ([0-9]+) invariant.*/RESULT chaos seed=\1 minutes=\2 events=\3 missed=\4 jobs=\5 steps_redone=\6 lines_in_flight=\7 failed_invariants=\8/' | grep '^RESULT' || true
exit $rc
