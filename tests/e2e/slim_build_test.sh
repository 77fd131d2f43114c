#!/bin/bash
# The slim build (cmake/slim.cmake, issue 18), as the lent GPU machine's fallback makes it: this tree
# configured with only the third-party folder the GPU bundle carries (scripts/gpu_bundle.sh
# --third-party: header-only libraries, GoogleTest's sources, encoder.json) — no Debian library —
# then its binaries linked against glibc, the C++ runtime (libstdc++, libgcc_s, GCC's libgomp) and
# CUDA only, run where nothing else is visible (bubblewrap): the slim unit tests pass, and a
# 4-step training run from a JSON config reaches the full build's state hash.
# The build (build/slim-e2e, kept for ccache and ninja) takes GoogleTest from the carried folder but
# the header-only libraries from the system, so ccache shares the release build's compiles; the
# carried headers are checked apart: a translation unit including them finds every one in the
# folder, and a configure given only the folder (ANNEAL_THIRD_PARTY) finds everything there.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/sandbox.sh"
command -v bwrap >/dev/null || { bad "bwrap is missing: run scripts/setup.sh"; finish; }
SRC=$(pwd)
TP=$SRC/build/slim-third-party BUILD=$SRC/build/slim-e2e
rm -rf "$TP" && bash scripts/gpu_bundle.sh --third-party "$TP"
check "the bundle's third-party folder is made" test -f "$TP/nlohmann/json.hpp" -a -f "$TP/googletest/CMakeLists.txt"
printf '#include <nlohmann/json.hpp>\n#include <CLI/CLI.hpp>\n#include <xxhash.h>\n' |
  c++ -std=c++20 -fsyntax-only -H -DXXH_INLINE_ALL -I"$TP" -x c++ - 2>"$TMP/headers.txt"
rc=$?
outside=$(grep -E '^\.+ ' "$TMP/headers.txt" | awk '{ print $2 }' | grep -E '/(nlohmann|CLI)/|xxhash' | grep -v "^$TP/" | head -3)
check "nlohmann/json, CLI11 and xxHash compile from the carried folder alone (exit $rc)${outside:+; outside it: $outside}" \
  test $rc -eq 0 -a -z "$outside"
cmake -S . -B "$TMP/cfg" -G Ninja -DANNEAL_SLIM=ON -DANNEAL_CUDA=OFF -DANNEAL_THIRD_PARTY="$TP" >"$TMP/cfg.log" 2>&1
rc=$?
check "a configure given only the carried folder finds everything in it (exit $rc): $(grep -m1 'slim build' "$TMP/cfg.log")" \
  grep -q "headers from $TP, $TP, $TP; GoogleTest from $TP/googletest" "$TMP/cfg.log"
t0=$SECONDS
nice cmake --preset slim -B "$BUILD" -DANNEAL_GTEST_SOURCE="$TP/googletest" >"$TMP/configure.log" 2>&1 &&
  nice cmake --build "$BUILD" -j2 >"$TMP/build.log" 2>&1
rc=$?
check "the slim build builds (exit $rc, $((SECONDS - t0)) s): $(grep -m3 -E 'error|FAILED' "$TMP/build.log" "$TMP/configure.log")" \
  test $rc -eq 0
echo "slim build: $((SECONDS - t0)) s"
allowed='^(linux-vdso\.so|/lib64/ld-linux|libc\.so|libm\.so|libmvec|libpthread|libdl\.so|librt\.so|libstdc\+\+|libgcc_s|libgomp|libcuda\.so|libcudart|libcublas|libnccl)'
bins=("$BUILD/src/anneal" "$BUILD/tests/anneal_unit_tests")
have_cuda_plugin "$BUILD" "the CUDA plugin's and anneal_cuda_tests' links" && bins+=("$BUILD/src/libanneal_cuda.so" "$BUILD/tests/anneal_cuda_tests")
for b in "${bins[@]}"; do
  others=$(ldd "$b" 2>&1 | awk '{ print $1 }' | grep -vE "$allowed" | tr '\n' ' ')
  check "$(basename "$b") links glibc, the C++ runtime and CUDA only${others:+ (also: $others)}" test -z "$others"
done
sandbox_root "$BUILD/src/anneal" libgomp.so.1
"$ANNEAL" prep --input data/kjv --output "$TMP/kjv" --val-fraction 0.05 --unit-mb 1 --quiet >/dev/null
sandbox() { bwrap "${SANDBOX[@]}" --ro-bind "$BUILD" "$BUILD" --ro-bind "$TMP/kjv" /kjv --bind "$TMP" /scratch "$@"; }
sandbox "$BUILD/tests/anneal_unit_tests" >"$TMP/unit.out" 2>&1
rc=$?
check "the slim unit tests pass inside the sandbox (exit $rc): $(grep -E '^\[  (PASSED|FAILED)' "$TMP/unit.out" | tr '\n' ' ')" \
  test $rc -eq 0
config() {  # config CKPT_DIR DATA_DIR
  cat <<JSON
{"model": {"vocab_size": 50257, "max_seq_len": 32, "n_layer": 2, "n_head": 2, "n_embd": 32},
 "data": {"dir": "$2", "seq_len": 32, "batch_size": 4, "seed": 7},
 "optim": {"lr": 3.0e-3, "warmup_steps": 2},
 "train": {"steps": 4, "log_every": 1, "eval_every": 2, "eval_batches": 2, "seed": 99, "peak_gflops": 100,
           "kernels": "ref", "threads": 1, "checkpoint_dir": "$1", "checkpoint_every": 2}}
JSON
}
config /scratch/slim_ck /kjv >"$TMP/slim.json"
config "$TMP/full_ck" "$TMP/kjv" >"$TMP/full.json"
sandbox "$BUILD/src/anneal" train --config /scratch/slim.json >"$TMP/slim.out" 2>&1
rc=$?
OMP_NUM_THREADS=1 "$ANNEAL" train --config "$TMP/full.json" >"$TMP/full.out" 2>&1
hash_of() { sed -nE 's/^state hash.*: ([0-9a-f]+)$/\1/p' "$1" | tail -1; }
check "a 4-step run from a JSON config trains inside the sandbox (exit $rc): $(tail -c 200 "$TMP/slim.out" | tr '\n' ' ')" \
  grep -Eq '^step +4/4 \| loss' "$TMP/slim.out"
check "... and reaches the full build's state hash ($(hash_of "$TMP/slim.out") vs $(hash_of "$TMP/full.out"))" \
  test -n "$(hash_of "$TMP/full.out")" -a "$(hash_of "$TMP/slim.out")" = "$(hash_of "$TMP/full.out")"
printf 'model: {n_layer: 2}\n' >"$TMP/cfg.yaml"
expect_exit "a YAML config is refused by the slim build, exit 2, saying it reads JSON" 2 "reads JSON configs only" \
  "$BUILD/src/anneal" train --config "$TMP/cfg.yaml"
expect_exit "s3:// is refused, naming the full build" 2 "slim build, which has no S3 client" \
  "$BUILD/src/anneal" ckpt ls s3://bucket/ckpts
finish
