#!/usr/bin/env bash
# The chaos soak: tests/chaos/soak.sh SEED MINUTES [ANNEAL] [-- soak.py options]
# A 2-instance training job on the local backend, checkpointing to a real radosgw behind the S3
# fault proxy, while faults drawn from SEED are injected for MINUTES minutes; then the invariants
# are checked (tests/chaos/README.md). Needs root (a size-limited tmpfs), radosgw, faketime, s3cmd:
# scripts/setup.sh installs them. Exit 0: every invariant held; 1: one failed (named); 2: cannot run.
set -euo pipefail
cd "$(dirname "$0")/../.."
SEED=${1:?usage: tests/chaos/soak.sh SEED MINUTES [ANNEAL]}
MINUTES=${2:?usage: tests/chaos/soak.sh SEED MINUTES [ANNEAL]}
ANNEAL=$(readlink -f "${3:-build/release/src/anneal}")
shift $(( $# >= 3 ? 3 : $# ))
[ "${1:-}" != "--" ] || shift
PROXY=$(dirname "$(dirname "$ANNEAL")")/tests/anneal_fault_proxy
[ -x "$PROXY" ] || { echo "soak: $PROXY is missing: build the target anneal_fault_proxy" >&2; exit 2; }
exec /usr/bin/python3 tests/chaos/soak.py --seed "$SEED" --minutes "$MINUTES" --anneal "$ANNEAL" --proxy "$PROXY" "$@"
