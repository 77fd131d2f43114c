#!/usr/bin/env bash
# unit.cuda_build: the CUDA backend was built — the plugin libanneal_cuda.so links cudart and
# cuBLASLt, anneal_cuda_tests exists, and every .cu under src/kernels/cuda has a ptxas report (its
# kernels' registers and spills, printed here) — or, in a build configured without nvcc, a skip that
# says so. scripts/run_tests.sh accepts that skip on a developer's machine and fails it under CI
# (ANNEAL_REQUIRE_CUDA=1, set by .ci/run): CI's machines get CUDA 13 from scripts/setup.sh.
#   cuda_build_test.sh SOURCE_DIR BUILD_DIR ON|OFF
source "$(dirname "$0")/../e2e/lib.sh"
SRC=$1 BUILD=$2 BUILT=$3
if [ "$BUILT" != ON ]; then
  skip "this build found no CUDA toolkit (nvcc), so the CUDA kernels, libanneal_cuda.so and anneal_cuda_tests were not built: run scripts/setup.sh (it installs CUDA 13 into tools/cuda), then reconfigure ($BUILD)"
fi
plugin=$BUILD/src/libanneal_cuda.so
check "the CUDA plugin is built ($plugin)" test -f "$plugin"
check "... and links cudart and cuBLASLt: $(ldd "$plugin" 2>/dev/null | grep -oE 'lib(cudart|cublasLt)\.so[.0-9]*' | sort -u | tr '\n' ' ')" \
  test "$(ldd "$plugin" | grep -cE 'lib(cudart|cublasLt)\.so.* => /')" -eq 2
check "anneal_cuda_tests is built" test -x "$BUILD/tests/anneal_cuda_tests"
for cu in "$SRC"/src/kernels/cuda/*.cu; do
  report=$BUILD/ptxas/$(basename "$cu").o.txt
  check "ptxas report for $(basename "$cu"): $(grep -c 'Used [0-9]* registers' "$report" 2>/dev/null) kernel(s)" \
    grep -q 'Used [0-9]* registers' "$report"
done
NVCC=$(sed -n 's/^CMAKE_CUDA_COMPILER:[A-Z]*=//p' "$BUILD/CMakeCache.txt")
echo "  nvcc: $(grep -m1 -oE 'release [0-9.]+, V[0-9.]+' <("$NVCC" --version))"
# The compute_80 PTX the build embeds (for GPUs without the sm_90a code) assembles for sm_90: the check a
# forced PTX JIT on the device would make, done here offline (bench/gpu/device_check.sh no longer spends
# device time on it). Each .cu to PTX as the build compiles it, then ptxas for sm_90.
ptx=$(mktemp -d /tmp/anneal_ptx.XXXXXX)
for cu in "$SRC"/src/kernels/cuda/*.cu; do
  name=$(basename "$cu" .cu)
  check "$name.cu's compute_80 PTX assembles for sm_90 (ptxas -arch=sm_90)" \
    sh -c '"$1" -ptx -arch=compute_80 -std=c++17 -O3 -I"$2/src" -o "$3.ptx" "$4" && "$(dirname "$1")/ptxas" -arch=sm_90 -o /dev/null "$3.ptx"' \
    _ "$NVCC" "$SRC" "$ptx/$name" "$cu"
done
rm -rf "$ptx"
# Per .cu: its sm_90a kernels, the most registers one uses, and any spills (the whole report is
# $BUILD/ptxas-report.txt; the build prints its first lines).
for report in "$BUILD"/ptxas/*.txt; do
  awk -v f="$(basename "$report" .o.txt)" '
    /Compiling entry function/ { sm90 = ($0 ~ /sm_90a/) }
    sm90 && /Used [0-9]+ registers/ { n++; for (i = 1; i <= NF; i++) if ($(i+1) == "registers,") r = $i + 0; if (r > max) max = r }
    sm90 && /bytes spill (stores|loads)/ { for (i = 1; i <= NF; i++) if ($i == "bytes" && $(i-1) + 0 > 0) spill++ }
    END { printf "  ptxas: %-22s %3d sm_90a kernels, at most %3d registers, %d with spills\n", f, n, max, spill }' "$report"
done
finish
