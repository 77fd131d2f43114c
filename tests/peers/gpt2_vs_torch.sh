#!/usr/bin/env bash
# Golden parity with PyTorch: writes the golden file with Debian's python3 + torch, then runs the C++
# comparison (tests/model/gpt_vs_torch_test.cc) on both backends.
#   tests/peers/gpt2_vs_torch.sh PEER_TEST_BINARY
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${1:-build/release/tests/anneal_peer_tests}
/usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "missing: python3-torch (scripts/setup.sh installs it)" >&2; exit 2; }
TMP=$(mktemp -d /tmp/anneal_golden.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
/usr/bin/python3 tests/peers/torch_gpt2_golden.py --out "$TMP/gpt2.safetensors"
source tests/testing/gtest_run.sh
ANNEAL_GOLDEN="$TMP/gpt2.safetensors" OMP_NUM_THREADS=2 gtest_run "$BIN" 'Backends/GptVsTorch.*'
