#!/bin/bash
# The GPU bundle (scripts/gpu_bundle.sh): packed under 48 MiB, unpacked into an empty folder, and run
# where only the bundle, glibc, libstdc++/libgcc_s and the CUDA libraries are visible (bubblewrap: a
# root of nothing else, the way the lent GPU machine has none of our Debian libraries): `anneal
# --version`, and one CPU training step on the bundled corpus.
source "$(dirname "$0")/lib.sh"
BUILD=$(readlink -f "$(dirname "$ANNEAL")/..")
command -v bwrap >/dev/null || { bad "bwrap is missing: run scripts/setup.sh"; finish; }
"$ANNEAL" prep --input data/kjv --output "$TMP/kjv" --val-fraction 0.05 --unit-mb 1 --quiet >/dev/null
bash scripts/gpu_bundle.sh "$BUILD" "$TMP/b.tar.gz" "$TMP/kjv" >"$TMP/bundle.log" 2>&1
rc=$?
check "the bundle is made (exit $rc): $(tail -c 300 "$TMP/bundle.log" | tr '\n' ' ')" test $rc -eq 0
check "... and is under 48 MiB ($(du -m "$TMP/b.tar.gz" | cut -f1) MiB)" test "$(du -m "$TMP/b.tar.gz" | cut -f1)" -le 48
mkdir -p "$TMP/u"
tar -C "$TMP/u" -xzf "$TMP/b.tar.gz"
check "it holds anneal, its tests, run.sh and the corpus" test -x "$TMP/u/bin/anneal" -a -x "$TMP/u/run.sh" \
  -a -f "$TMP/u/data/kjv/dataset.json" -a -x "$TMP/u/bin/anneal_unit_tests"
check "it holds the slim build's third_party/ (headers, GoogleTest's sources, encoder.json)" \
  test -f "$TMP/u/third_party/nlohmann/json.hpp" -a -f "$TMP/u/third_party/CLI/CLI.hpp" -a -f "$TMP/u/third_party/xxhash.h" \
  -a -f "$TMP/u/third_party/googletest/CMakeLists.txt" -a -f "$TMP/u/third_party/encoder.json"
if have_cuda_plugin "$BUILD" "the bundle's CUDA plugin"; then
  check "it holds the CUDA plugin beside the libraries" test -f "$TMP/u/lib/libanneal_cuda.so"
fi
check "no glibc, libstdc++ or CUDA library in it" bash -c "! ls '$TMP/u/lib' | grep -Eq '^(libc\.so|libstdc|libcudart|libcublas|libnccl)'"
cat >"$TMP/u/cfg.yaml" <<YAML
model: {vocab_size: 50257, max_seq_len: 64, n_layer: 1, n_head: 2, n_embd: 32}
data: {dir: /bundle/data/kjv, seq_len: 32, batch_size: 2, seed: 1}
train: {steps: 1, log_every: 1, threads: 1, peak_gflops: 1}
YAML
source "$(dirname "$0")/sandbox.sh"
sandbox_root "$ANNEAL"
sandbox() { bwrap "${SANDBOX[@]}" --ro-bind "$TMP/u" /bundle "$@"; }
sandbox /bundle/bin/anneal --version >"$TMP/version.out" 2>&1
rc=$?
want=$("$BUILD/src/anneal" --version)
check "anneal --version runs inside the sandbox: exit $rc and exactly the line of the build it came from ('$want'): $(head -c 200 "$TMP/version.out")" \
  bash -c '[ "$1" -eq 0 ] && [ "$(cat "$2")" = "$3" ] && grep -Eqx "anneal [0-9][^ ]* \(commit ([0-9a-f]{7,}(-dirty)?|unknown)\)" "$2"' _ "$rc" "$TMP/version.out" "$want"
sandbox /bundle/bin/anneal train --config /bundle/cfg.yaml >"$TMP/train.out" 2>&1
rc=$?
check "a CPU training step runs with only the bundle visible (exit $rc): $(tail -c 300 "$TMP/train.out" | tr '\n' ' ')" \
  grep -Eq '^step +1/1 \| loss' "$TMP/train.out"
if ! have_cuda_plugin "$BUILD" "train.device=cuda inside the bundle"; then :
elif nvidia-smi -L >/dev/null 2>&1; then skip_part "train.device=cuda without a GPU: this machine has one (bench/gpu/device_check.sh runs the bundle on it)"
else
  sandbox /bundle/bin/anneal train --config /bundle/cfg.yaml --set train.device=cuda >"$TMP/cuda.out" 2>&1
  rc=$?
  check "train.device=cuda loads the bundle's plugin from lib/ and, with no GPU, is exit 2 naming why (exit $rc): $(tail -c 200 "$TMP/cuda.out")" \
    bash -c "[ $rc -eq 2 ] && grep -q 'no CUDA device' '$TMP/cuda.out'"
fi
finish
