#!/usr/bin/env bash
# bench/gpu/device_check.sh: the CUDA backend's check on a lent GPU machine (issue 18), in one call of
# the device tool. It needs the bundle made here (scripts/gpu_bundle.sh after `make run`), carried as
# build/release/anneal-gpu.tar.gz:
#   cmake --build build/release && bash scripts/gpu_bundle.sh     (here, right before: a stale bundle
#                                                                  tests old code; load names its commit)
#   run(command="bash bench/gpu/device_check.sh", carry=["build/release/anneal-gpu.tar.gz"], timeout_s=330)
# and rerun only a failing stage with --stages NAME. Every external command runs under `timeout -k`.
# One deadline bounds the whole call: no stage starts after DEADLINE_S (default 290) seconds, nor one
# whose usual length would not fit before it — each is noted "skip" with the seconds it lacked, so a
# device call's timeout of about 330 s is never reached. The figures that matter come first.
# Stages (--stages a,b,...; default all, in this order), each isolated — a failure is recorded and the
# next runs:
#   probe     nvidia-smi, glibc, PyTorch's version
#   load      unpack the bundle, anneal --version, the CUDA libraries the loader resolves; a bundle built
#             at another commit than the tree's is warned about (its figures are that commit's)
#   fallback  only when load failed (or named in --stages): the slim build (cmake/slim.cmake) of this
#             tree with the bundle's third_party/ on the machine's cores (ninja), its binaries put in
#             the bundle's bin/ for the stages after it
#   step      the golden config (tests/e2e/golden_test.sh) for 6 steps with train.kernels=cuda: f32
#             losses against the CPU engine's golden ones (relative 1e-5); bf16 within 3x the error of
#             ref's emulated bf16 on this machine's CPU (same config) and its loss falling; two runs
#             give the same hash; a resume from step 3 reaches the uninterrupted run's hash; the
#             CPU engine's kept fixture checkpoint resumes on cuda with the golden losses; a 2-step
#             GPU checkpoint of the fixture config comes back in $OUT for tests/e2e/gpu_checkpoint_test.sh;
#             a run with train.profile_steps writes a valid trace with device spans (CUDA events)
#   parity    every cuda op against ref on this machine's CPU (the parity harness, f32 and bf16, both
#             attention paths), NCCL at one rank and the CUDA kernel tests, each through
#             tests/testing/gtest_run.sh (a filter that selects nothing, or a skip, fails). No forced
#             PTX JIT rerun: CI checks the compute_80 PTX offline (ptxas -arch=sm_90, unit.cuda_build)
#   bench     GPT-2 124M, B=16, T=1024, bf16: anneal with attention path 1 and path 2: tokens/s, MFU
#             against 989 TFLOP/s, peak device memory; 4 steps of each path with ANNEAL_CUDA_OP_TIMES=1
#             and the step cost model's table for this GPU (anneal plan --device) beside them (kernels.txt)
#   torch     the same step in PyTorch compiled (bench/gpu/torch_gpt2.py) and the ratios to bench's
#   ceilings  device-to-device copy GB/s and an 8192^3 bf16 GEMM TFLOP/s through PyTorch (random data)
#   zero      (issue 33) one GPU, so world size 1: GPT-2 124M, B=8, T=512, bf16, 6 steps at ZeRO 0, at
#             ZeRO 3, with full recomputation, and with train.offload_activations too: each run's
#             allocator peak beside the memory formula (within 5 %), its peak device memory, its median
#             step time, and anneal plan's total for the same config
#   llama     the Llama 3.2 1B shape with GPT-2's vocabulary, B=4, T=1024, bf16: anneal with each attention
#             path (path 2 reads the grouped key/value heads in place) against the same model in plain
#             PyTorch compiled with SDPA (bench/gpu/torch_llama.py)
#   hf        (issue 32) a small Llama trained 8 steps on cuda, exported (anneal export --format hf, bf16),
#             loaded by transformers on cuda: its cross-entropy equals anneal eval's within 2e-2
#   memcheck  compute-sanitizer memcheck, racecheck and synccheck over the CUDA kernel tests (last: only
#             when time is left)
# Peak device memory is the GPU's used memory, polled while a run lasts, less what was in use before it
# (a process filter would watch `timeout`'s pid, not the CUDA process's).
# Writes at most 5 files to $OUT (flat: stages.log, summary.txt, bench_anneal.log, kernels.txt,
# gpu_fixture_step2.tgz), each stage's log and the summary as soon as the stage ends (a timeout loses
# nothing already done), and prints the summary table last.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/device_check_out}
mkdir -p "$OUT"
ORDER=probe,load,fallback,step,parity,bench,torch,ceilings,zero,llama,hf,memcheck
STAGES=${STAGES:-probe,load,step,parity,bench,torch,ceilings,zero,llama,hf,memcheck}
[ "${1:-}" = --stages ] && STAGES=$2
DEADLINE_S=${DEADLINE_S:-290}
# Each stage's usual length in seconds on the GPU machine: a stage starts only when that much is left.
declare -A NEEDS=([probe]=5 [load]=15 [fallback]=240 [step]=45 [parity]=45 [bench]=90 [torch]=60 [ceilings]=15
                  [zero]=70 [llama]=150 [hf]=60 [memcheck]=150)
BUNDLE=${BUNDLE:-build/release/anneal-gpu.tar.gz}
B=/tmp/anneal-bundle
declare -a SUMMARY
note() { SUMMARY+=("$(printf '%-9s %-6s %s' "$1" "$2" "$3")"); }
want() { [[ ",$STAGES," == *",$1,"* ]]; }
LOGS=/tmp/device_check_logs
rm -rf "$LOGS" && mkdir -p "$LOGS"
run_stage() {  # run_stage NAME: runs stage_NAME with its output in $LOGS/NAME.log; a failure is noted
  local name=$1 t0=$SECONDS left=$((DEADLINE_S - SECONDS))
  want "$name" || return 0
  if [ "$left" -lt "${NEEDS[$name]}" ]; then
    note "$name" skip "deadline: ${left} s left of ${DEADLINE_S}, the stage needs about ${NEEDS[$name]} s"
    printf '%s\n' "${SUMMARY[@]}" >"$OUT/summary.txt"
    return 0
  fi
  echo "=== $name $(date -u +%T)"
  if "stage_$name" >"$LOGS/$name.log" 2>&1; then note "$name" ok "$(tail -1 "$LOGS/$name.log") ($((SECONDS - t0)) s)"
  else note "$name" FAIL "$(tail -1 "$LOGS/$name.log") ($((SECONDS - t0)) s)"; fi
  tail -5 "$LOGS/$name.log"
  { echo "=== $name"; cat "$LOGS/$name.log"; } >>"$OUT/stages.log"
  printf '%s\n' "${SUMMARY[@]}" >"$OUT/summary.txt"  # as each stage ends: a timeout keeps what was done
}

stage_probe() {
  timeout -k 5 20 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv || return 1
  ldd --version | head -1
  timeout -k 5 30 python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))'
  echo "probe: $(timeout -k 5 20 nvidia-smi --query-gpu=name --format=csv,noheader)"
}

stage_load() {
  [ -f "$BUNDLE" ] || { echo "no bundle at $BUNDLE: make it with scripts/gpu_bundle.sh and carry it"; return 1; }
  rm -rf "$B" && mkdir -p "$B"
  tar -C "$B" -xzf "$BUNDLE" || python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$BUNDLE" "$B" \
    || return 1
  timeout -k 5 30 "$B/run.sh" anneal --version || return 1
  timeout -k 5 30 "$B/run.sh" --ldd anneal | grep -E "cudart|cublas|nccl|not found"
  timeout -k 5 30 "$B/run.sh" --ldd ../lib/libanneal_cuda.so | grep -E "cudart|cublas|not found"
  local built head
  built=$(timeout -k 5 30 "$B/run.sh" anneal --version 2>&1 | sed -nE 's/.*commit ([0-9a-f]+).*/\1/p' | head -1)
  head=$(git rev-parse --short=12 HEAD 2>/dev/null || true)
  if [ -n "$head" ] && [ "$built" != "$head" ]; then  # warned, not rebuilt: the figures are the bundle's commit's
    echo "load: warning: the bundle was built at $built but the tree is at $head (scripts/gpu_bundle.sh rebuilds it); its figures are $built's"
    return 0
  fi
  echo "load: the bundle runs (built at commit ${built:-unknown})"
}

stage_fallback() {
  [ -d "$B/third_party" ] || { echo "fallback: no $B/third_party (the bundle did not unpack)"; return 1; }
  local nvcc slim=/tmp/anneal-slim
  nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null) || { echo "fallback: no nvcc"; return 1; }
  timeout -k 5 120 cmake --preset slim -B "$slim" -DANNEAL_THIRD_PARTY="$B/third_party" -DCMAKE_CUDA_COMPILER="$nvcc" \
    -DCUDAToolkit_ROOT="$(dirname "$(dirname "$nvcc")")" >"$LOGS/fallback-configure.log" 2>&1 || { tail -20 "$LOGS/fallback-configure.log"; return 1; }
  grep -q 'CUDA kernels ON' "$LOGS/fallback-configure.log" || { grep anneal: "$LOGS/fallback-configure.log"; echo "fallback: no CUDA kernels"; return 1; }
  timeout -k 5 300 cmake --build "$slim" -j"$(nproc)" >"$LOGS/fallback-build.log" 2>&1 || { grep -m10 -E 'error|FAILED' "$LOGS/fallback-build.log"; return 1; }
  # The stages after this run the slim binaries through the bundle's run.sh (its CUDA library path);
  # a link keeps /proc/self/exe in the build, where the plugin is found (beside anneal, ../src of tests).
  mkdir -p "$B/bin"
  ln -sf "$slim/src/anneal" "$B/bin/anneal"
  ln -sf "$slim/tests/anneal_unit_tests" "$B/bin/anneal_unit_tests"
  ln -sf "$slim/tests/anneal_cuda_tests" "$B/bin/anneal_cuda_tests"
  mkdir -p "$B/lib" && ln -sf "$slim/src/libanneal_cuda.so" "$B/lib/libanneal_cuda.so"
  timeout -k 5 30 "$B/run.sh" anneal --version || return 1
  echo "fallback: the slim build runs ($(grep -c . "$LOGS/fallback-build.log") build lines)"
}

stage_ceilings() {
  timeout -k 5 60 python3 - <<'PY'
import torch
x = torch.empty(2 * 1024**3 // 4, device="cuda")
y = torch.empty_like(x)
for _ in range(3): y.copy_(x)
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
s.record()
for _ in range(10): y.copy_(x)
e.record(); torch.cuda.synchronize()
gbs = 10 * 2 * x.numel() * 4 / (s.elapsed_time(e) / 1e3) / 1e9
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16); b = torch.randn_like(a)
for _ in range(3): a @ b
s.record()
for _ in range(10): a @ b
e.record(); torch.cuda.synchronize()
tf = 10 * 2 * 8192**3 / (s.elapsed_time(e) / 1e3) / 1e12
print(f"ceilings: copy {gbs:.0f} GB/s (read + write), bf16 GEMM 8192^3 {tf:.0f} TFLOP/s")
PY
}

# gtested BIN FILTER SECONDS: the bundle's BIN through tests/testing/gtest_run.sh (a filter selecting
# no test, or a skipped test, fails), under a timeout.
gtested() {
  mkdir -p /tmp/anneal-bin
  printf '#!/bin/bash\nexec %q/run.sh %q "$@"\n' "$B" "$1" >"/tmp/anneal-bin/$1"
  chmod +x "/tmp/anneal-bin/$1"
  timeout -k 5 "$3" bash -c 'source tests/testing/gtest_run.sh; gtest_run "$@"' _ "/tmp/anneal-bin/$1" "$2"
}

stage_parity() {
  local rc=0
  # every cuda op against ref, both attention paths (path 2 and the GELU-fused GEMM with flash); NCCL at
  # one rank (two ranks on one GPU NCCL refuses: multi-rank stays tested over Gloo); the kernel tests
  gtested anneal_unit_tests 'Registered/BackendParity.*cuda*' 120 || rc=1
  ANNEAL_CUDA_ATTENTION=flash gtested anneal_unit_tests 'Registered/BackendParity.*cuda*' 120 || rc=1
  # the composite ops over every backend, cuda among them: the gradient norm's one read back, the
  # input gradient written by a beta-0 GEMM, the GELU backward in its epilogue (issue 34)
  gtested anneal_unit_tests 'ParityTest.SumSquaresEach*:ParityTest.LinearBackwardWrite*:ParityTest.LinearBackwardGelu*' 60 || rc=1
  gtested anneal_cuda_tests 'NcclCommunicatorTest.*' 60 || rc=1
  gtested anneal_cuda_tests '-NcclCommunicatorTest.*' 90 || rc=1
  echo "parity: the cuda parity cases (both attention paths), NCCL and the CUDA kernel tests: $([ $rc = 0 ] && echo passed || echo FAILED)"
  return $rc
}

stage_memcheck() {
  command -v compute-sanitizer >/dev/null || { echo "memcheck: no compute-sanitizer"; return 1; }
  local rc=0 tool
  # memcheck over the elementwise kernels and path 2 (small shapes); racecheck and synccheck over path 2
  # (its shared-memory tiles and barriers)
  ANNEAL_TEST_SMALL=1 timeout -k 5 150 compute-sanitizer --tool memcheck --error-exitcode 9 "$B/run.sh" anneal_cuda_tests \
    --gtest_filter='*Convert*:*AdamW*:CudaFlashTest.ForwardAndBackward*' || rc=1
  for tool in racecheck synccheck; do
    ANNEAL_TEST_SMALL=1 timeout -k 5 150 compute-sanitizer --tool $tool --error-exitcode 9 "$B/run.sh" anneal_cuda_tests \
      --gtest_filter='CudaFlashTest.ForwardAndBackward*' || rc=1
  done
  echo "memcheck: memcheck, racecheck, synccheck: $([ $rc = 0 ] && echo clean || echo FAILED)"
  return $rc
}

golden_cfg() {  # golden_cfg DTYPE CKPT [KERNELS]: JSON, which both builds read (the slim one reads nothing else)
  cat <<JSON
{"model": {"vocab_size": 50257, "max_seq_len": 32, "n_layer": 2, "n_head": 2, "n_embd": 32},
 "data": {"dir": "$B/data/kjv", "seq_len": 32, "batch_size": 4, "seed": 7},
 "optim": {"lr": 3.0e-3, "warmup_steps": 2},
 "train": {"steps": 6, "log_every": 1, "eval_every": 3, "eval_batches": 2, "seed": 99, "resume": "auto",
           "peak_gflops": 100, "kernels": "${3:-cuda}", "dtype": "$1", "checkpoint_dir": "$2", "checkpoint_every": 3},
 "dist": {"timeout_s": 60}}
JSON
}

fixture_cfg() {  # fixture_cfg CKPT: tests/e2e/golden_test.sh's fixture run (C=8) on cuda, f32
  cat <<JSON
{"model": {"vocab_size": 50257, "max_seq_len": 16, "n_layer": 1, "n_head": 2, "n_embd": 8},
 "data": {"dir": "$B/data/kjv", "seq_len": 16, "batch_size": 2, "seed": 5},
 "optim": {"lr": 1.0e-2, "warmup_steps": 1},
 "train": {"steps": 4, "log_every": 1, "eval_every": 0, "checkpoint_every": 2, "seed": 21, "resume": "auto",
           "peak_gflops": 100, "kernels": "cuda", "dtype": "f32", "checkpoint_dir": "$1"}}
JSON
}

stage_step() {
  local w=/tmp/anneal-step
  rm -rf "$w" && mkdir -p "$w"
  golden_cfg f32 "$w/a" >"$w/f32a.json"
  golden_cfg f32 "$w/b" >"$w/f32b.json"
  golden_cfg bf16 "$w/c" >"$w/bf16.json"
  golden_cfg bf16 "$w/e" ref >"$w/bf16ref.json"  # ref's emulated bf16 on this CPU: bf16's own error
  timeout -k 5 90 "$B/run.sh" anneal train --config "$w/f32a.json" >"$w/a.log" 2>&1 || { tail -5 "$w/a.log"; return 1; }
  timeout -k 5 90 "$B/run.sh" anneal train --config "$w/f32b.json" >"$w/b.log" 2>&1 || { tail -5 "$w/b.log"; return 1; }
  timeout -k 5 90 "$B/run.sh" anneal train --config "$w/bf16.json" >"$w/c.log" 2>&1 || { tail -5 "$w/c.log"; return 1; }
  timeout -k 5 120 "$B/run.sh" anneal train --config "$w/bf16ref.json" >"$w/e.log" 2>&1 || { tail -5 "$w/e.log"; return 1; }
  # A resume from step 3: the run's step-6 checkpoint removed, run again from step 3.
  rm -rf "$w/b/step-00000006"
  timeout -k 5 90 "$B/run.sh" anneal train --config "$w/f32b.json" >"$w/r.log" 2>&1 || { tail -5 "$w/r.log"; return 1; }
  # One checkpoint format on both devices: the CPU engine's kept step-2 checkpoint resumed on cuda...
  cp -r tests/e2e/golden/fixture "$w/fx"
  fixture_cfg "$w/fx" >"$w/fx.json"
  timeout -k 5 90 "$B/run.sh" anneal train --config "$w/fx.json" >"$w/fx.log" 2>&1 || { tail -5 "$w/fx.log"; return 1; }
  # ... and a GPU one (2 steps from scratch) brought back for the CPU to resume here
  # (tests/e2e/gpu_checkpoint_test.sh, once it is kept as tests/e2e/golden/gpu_fixture/step-00000002)
  fixture_cfg "$w/gx" >"$w/gx.json"
  timeout -k 5 90 "$B/run.sh" anneal train --config "$w/gx.json" --set train.steps=2 >"$w/gx.log" 2>&1 || { tail -5 "$w/gx.log"; return 1; }
  tar -C "$w/gx" -czf "$OUT/gpu_fixture_step2.tgz" step-00000002
  # The step profiler on the device: the layers' spans again from CUDA events on the compute stream
  # (tensor/device_trace.h), nested on their track, beside the host's.
  timeout -k 5 90 "$B/run.sh" anneal train --config "$w/f32a.json" --set train.profile_steps=3,5 --set train.profile_dir="$w/prof" \
    --set train.checkpoint_dir="$w/p" >"$w/p.log" 2>&1 || { tail -5 "$w/p.log"; return 1; }
  python3 tests/e2e/trace_check.py valid "$w/prof/rank-00000.trace.json" || return 1
  python3 tests/e2e/trace_check.py ontrack "$w/prof/rank-00000.trace.json" "cuda compute stream" backward || return 1
  grep "profile: " "$w/p.log" | head -12
  # The golden file of this CPU's maker when there is one (tests/e2e/golden_lib.sh), else the Intel one:
  # the comparison has a tolerance, which both hold.
  golden=tests/e2e/golden/runs-$(awk -F': *' '/^vendor_id/ { print $2; exit }' /proc/cpuinfo).txt
  [ -f "$golden" ] || golden=tests/e2e/golden/runs-GenuineIntel.txt
  python3 - "$w" "$golden" <<'PY'
import re, sys
w, golden = sys.argv[1], sys.argv[2]
def losses(path):
    return {int(m.group(1)): float.fromhex(m.group(2)) for m in re.finditer(r"^step +(\d+)/\d+ \| loss [0-9.]+ \((0x[^)]+)\)", open(path).read(), re.M)}
def hash_of(path):
    h = re.findall(r"state hash.*: ([0-9a-f]+)", open(path).read())
    return h[-1] if h else None
def golden_losses(name):
    for line in open(golden):
        if line.startswith(name + " "):
            return {int(k): float.fromhex(v) for k, v in (p.split(":") for p in line.split()[1][len("losses="):].split(","))}
    sys.exit(f"step: no golden line {name}")
def worst(got, ref):
    return max(abs(got[s] - ref[s]) / abs(ref[s]) if s in got else float("inf") for s in ref)
ref, fref = golden_losses("single_t1"), golden_losses("fixture_resume")
f32, bf = worst(losses(w + "/a.log"), ref), worst(losses(w + "/c.log"), ref)
emulated = worst(losses(w + "/e.log"), ref)  # bf16's own error: ref's emulation against the fp32 golden run
bcuda = losses(w + "/c.log")
falls = bool(bcuda) and bcuda[max(bcuda)] < bcuda[min(bcuda)]
fx = worst(losses(w + "/fx.log"), fref)
same = hash_of(w + "/a.log") == hash_of(w + "/b.log")
resumed = hash_of(w + "/r.log") == hash_of(w + "/a.log")
ok = f32 <= 1e-5 and bf <= 3 * emulated and falls and fx <= 1e-5 and same and resumed
print(f"step: f32 worst relative loss error {f32:.2e} (<= 1e-5), bf16 {bf:.2e} (<= 3 x ref's emulated bf16 "
      f"{emulated:.2e}; its loss falls: {falls}), CPU checkpoint resumed on cuda {fx:.2e} (<= 1e-5), repeat hash "
      f"equal {same}, resume-at-3 hash equal {resumed}: {'passed' if ok else 'FAILED'}")
sys.exit(0 if ok else 1)
PY
}

gpu_used() { timeout -k 2 10 nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1; }
gpu_peak() {  # gpu_peak PID: the device's peak used memory (MiB) while PID runs, less what was used before
  local pid=$1 base peak=0 m
  base=$(gpu_used); base=${base:-0}
  while kill -0 "$pid" 2>/dev/null; do
    m=$(gpu_used)
    [ -n "$m" ] && [ "$m" -gt "$peak" ] && peak=$m
    sleep 0.2
  done
  echo $((peak > base ? peak - base : 0))
}

stage_bench() {
  local w=/tmp/anneal-bench
  rm -rf "$w" && mkdir -p "$w"
  cat >"$w/gpt2.json" <<JSON
{"model": {"preset": "gpt2"},
 "data": {"dir": "$B/data/kjv", "seq_len": 1024, "batch_size": 16, "seed": 1, "verify_checksums": false},
 "optim": {"lr": 6.0e-4, "warmup_steps": 0},
 "train": {"steps": 12, "log_every": 1, "eval_every": 0, "eval_batches": 1, "kernels": "cuda", "dtype": "bf16",
           "resume": "none"}}
JSON
  # anneal with each attention path, its peak memory as the peer's; then 4 steps of each with the
  # op times (perturbed by their event reads: throughput is the runs without)
  local path peak apeak fpeak pid
  for path in gemm flash; do
    ANNEAL_CUDA_ATTENTION=$path timeout -k 5 150 "$B/run.sh" anneal train --config "$w/gpt2.json" >"$w/$path.log" 2>&1 &
    pid=$!
    peak=$(gpu_peak $pid)
    wait $pid || { tail -5 "$w/$path.log"; cat "$w/$path.log" >>"$OUT/bench_anneal.log"; return 1; }
    cat "$w/$path.log" >>"$OUT/bench_anneal.log"  # kept even if the peer fails
    [ $path = gemm ] && apeak=$peak || fpeak=$peak
  done
  for path in gemm flash; do
    { echo "== ANNEAL_CUDA_ATTENTION=$path"; ANNEAL_CUDA_OP_TIMES=1 ANNEAL_CUDA_ATTENTION=$path timeout -k 5 90 "$B/run.sh" anneal train \
        --config "$w/gpt2.json" --set train.steps=4 2>&1 | sed -n '/CUDA op times/,/all ops/p'; } >>"$OUT/kernels.txt"
  done
  # The step cost model's prediction of the same step on this GPU, beside the measured op times.
  local spec
  case "$(timeout -k 5 20 nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in
    *H200*) spec=h200 ;; *A100*) spec=a100 ;; *) spec=h100 ;;
  esac
  for path in gemm flash; do
    { echo "== the cost model (anneal plan --device $spec --attention $path)"
      timeout -k 5 60 "$B/run.sh" anneal plan --config "$w/gpt2.json" --device $spec --attention $path | sed -n '/one training step/,$p'; } >>"$OUT/kernels.txt"
  done
  echo "$apeak $fpeak" >"$w/peaks"
  python3 - "$w" "$apeak" "$fpeak" <<'PY'
import re, statistics, sys
w, apeak, fpeak = sys.argv[1:]
def tokens_per_s(log):
    ms = [float(x) for x in re.findall(r"^step +\d+/\d+ .*\| ([0-9.]+) ms \|", open(log).read(), re.M)][3:]
    return 16 * 1024 / (statistics.median(ms) / 1e3)
n = int(re.search(r", (\d+) parameters", open(w + "/gemm.log").read()).group(1))
fpt = 6 * n + 6 * 12 * 768 * 1024  # training FLOPs per token: 6N + 6 L T C (attention's QK^T and PV)
mfu = lambda tps: 100 * tps * fpt / 989e12
g, f = tokens_per_s(w + "/gemm.log"), tokens_per_s(w + "/flash.log")
print(f"bench: GPT-2 124M B=16 T=1024 bf16 — anneal path 1 {g:.0f} tok/s (MFU {mfu(g):.1f} %, {apeak} MiB), "
      f"path 2 {f:.0f} tok/s (MFU {mfu(f):.1f} %, {fpeak} MiB)")
PY
}

# The peer of bench: PyTorch compiled on the same step, and the ratios to bench's runs.
stage_torch() {
  local w=/tmp/anneal-bench pid tpeak
  [ -f "$w/peaks" ] || { echo "torch: bench did not finish: no anneal figures to compare with"; return 1; }
  timeout -k 5 200 python3 bench/gpu/torch_gpt2.py --batch 16 --seq 1024 --steps 12 --warmup 3 >"$w/torch.log" 2>&1 &
  pid=$!
  tpeak=$(gpu_peak $pid)
  wait $pid || { tail -5 "$w/torch.log"; return 1; }
  python3 - "$w" "$tpeak" <<'PY'
import re, statistics, sys
w, tpeak = sys.argv[1:]
def tokens_per_s(log):
    ms = [float(x) for x in re.findall(r"^step +\d+/\d+ .*\| ([0-9.]+) ms \|", open(log).read(), re.M)][3:]
    return 16 * 1024 / (statistics.median(ms) / 1e3)
t = dict(kv.split("=") for kv in re.search(r"RESULT (.*)", open(w + "/torch.log").read()).group(1).split())
tps_t, n = float(t["tokens_per_s"]), int(t["params"])
fpt = 6 * n + 6 * 12 * 768 * 1024
mfu = lambda tps: 100 * tps * fpt / 989e12
g, f = tokens_per_s(w + "/gemm.log"), tokens_per_s(w + "/flash.log")
print(f"torch: PyTorch compiled {tps_t:.0f} tok/s (MFU {mfu(tps_t):.1f} %, {tpeak} MiB); anneal path 1 {g:.0f}, "
      f"path 2 {f:.0f}: ratio {g / tps_t:.2f}x and {f / tps_t:.2f}x")
PY
}

stage_llama() {
  local w=/tmp/anneal-llama pid apeak tpeak
  rm -rf "$w" && mkdir -p "$w"
  cat >"$w/llama.json" <<JSON
{"model": {"family": "llama", "vocab_size": 50257, "max_seq_len": 1024, "n_layer": 16, "n_head": 32, "n_kv_head": 8,
           "n_embd": 2048, "intermediate_size": 8192, "rope_theta": 500000, "rope_scaling.factor": 32,
           "rope_scaling.original_max_seq_len": 8192, "tie_embeddings": true},
 "data": {"dir": "$B/data/kjv", "seq_len": 1024, "batch_size": 4, "seed": 1, "verify_checksums": false},
 "optim": {"lr": 3.0e-4, "warmup_steps": 0},
 "train": {"steps": 8, "log_every": 1, "eval_every": 0, "eval_batches": 1, "kernels": "cuda", "dtype": "bf16",
           "resume": "none"}}
JSON
  local path peak fpeak
  for path in gemm flash; do
    ANNEAL_CUDA_ATTENTION=$path timeout -k 5 120 "$B/run.sh" anneal train --config "$w/llama.json" >"$w/$path.log" 2>&1 &
    pid=$!
    peak=$(gpu_peak $pid)
    [ $path = gemm ] && apeak=$peak || fpeak=$peak
    wait $pid || { tail -5 "$w/$path.log"; cat "$w/$path.log" >>"$OUT/bench_anneal.log"; return 1; }
    cat "$w/$path.log" >>"$OUT/bench_anneal.log"
  done
  timeout -k 5 200 python3 bench/gpu/torch_llama.py --batch 4 --seq 1024 --steps 8 --warmup 3 >"$w/torch.log" 2>&1 &
  pid=$!
  tpeak=$(gpu_peak $pid)
  wait $pid || { tail -5 "$w/torch.log"; return 1; }
  python3 - "$w" "$apeak" "$fpeak" "$tpeak" <<'PY'
import re, statistics, sys
w, apeak, fpeak, tpeak = sys.argv[1:]
def tokens_per_s(log):
    ms = [float(x) for x in re.findall(r"^step +\d+/\d+ .*\| ([0-9.]+) ms \|", open(log).read(), re.M)][3:]
    return 4 * 1024 / (statistics.median(ms) / 1e3)
a, f = tokens_per_s(w + "/gemm.log"), tokens_per_s(w + "/flash.log")
t = dict(kv.split("=") for kv in re.search(r"RESULT (.*)", open(w + "/torch.log").read()).group(1).split())
tps_t, n = float(t["tokens_per_s"]), int(t["params"])
fpt = 6 * n + 6 * 16 * 2048 * 1024
mfu = lambda tps: 100 * tps * fpt / 989e12
print(f"llama: Llama 3.2 1B shape (V=50257) B=4 T=1024 bf16 — anneal path 1 {a:.0f} tok/s (MFU {mfu(a):.1f} %, "
      f"{apeak} MiB), path 2 {f:.0f} tok/s (MFU {mfu(f):.1f} %, {fpeak} MiB); PyTorch compiled {tps_t:.0f} tok/s "
      f"(MFU {mfu(tps_t):.1f} %, {tpeak} MiB); ratio {a / tps_t:.2f}x and {f / tps_t:.2f}x")
PY
}

stage_hf() {
  local w=/tmp/anneal-hf a
  python3 -c 'import transformers' 2>/dev/null || { echo "hf: transformers is not installed in this machine's python: not run"; return 1; }
  rm -rf "$w" && mkdir -p "$w"
  cat >"$w/llama.json" <<JSON
{"model": {"family": "llama", "vocab_size": 50257, "max_seq_len": 256, "n_layer": 4, "n_head": 8, "n_kv_head": 2,
           "n_embd": 256, "intermediate_size": 704, "rope_theta": 500000, "tie_embeddings": false},
 "data": {"dir": "$B/data/kjv", "seq_len": 256, "batch_size": 8, "seed": 1, "verify_checksums": false},
 "optim": {"lr": 1.0e-3, "warmup_steps": 2},
 "train": {"steps": 8, "log_every": 4, "eval_every": 0, "kernels": "cuda", "dtype": "bf16", "resume": "none",
           "checkpoint_dir": "$w/ck", "checkpoint_every": 8}}
JSON
  timeout -k 5 120 "$B/run.sh" anneal train --config "$w/llama.json" >"$w/train.log" 2>&1 || { tail -5 "$w/train.log"; return 1; }
  timeout -k 5 60 "$B/run.sh" anneal export --format hf "$w/ck" "$w/x" --dtype bf16 || return 1
  a=$(timeout -k 5 120 "$B/run.sh" anneal eval --checkpoint "$w/x" --data "$B/data/kjv" --batches 1 --batch-size 1 --seq-len 256 \
        --set train.kernels=cuda --set train.dtype=bf16 --json | sed -nE 's/.*"loss":([^,]+).*/\1/p')
  timeout -k 5 180 python3 - "$w/x" "$B/data/kjv" "$a" <<'PY'
import json, os, sys, torch
from transformers import AutoModelForCausalLM
folder, data, a = sys.argv[1], sys.argv[2], float(sys.argv[3])
info = json.load(open(os.path.join(data, "dataset.json")))
val = next(s for s in info["shards"] if s["split"] == "val")
raw = open(os.path.join(data, val["file"]), "rb").read()[1024:1024 + 2 * 257]
ids = torch.frombuffer(bytearray(raw), dtype=torch.int16).to(torch.int64) & 0xFFFF
m = AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.bfloat16, device_map="cuda")
with torch.no_grad():
    logits = m(ids[None, :256].cuda()).logits.float()[0]
h = torch.nn.functional.cross_entropy(logits, ids[1:257].cuda()).item()
ok = abs(a - h) <= 2e-2 * abs(h)
print(f"hf: exported bf16 Llama in transformers on cuda: loss {h:.5f}, anneal eval on cuda {a:.5f} "
      f"(relative {abs(a - h) / abs(h):.2e}, bound 2e-2): {'ok' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
PY
}

stage_zero() {
  local w=/tmp/anneal-zero pid z line peak formula dev nv ms plan bad=0
  rm -rf "$w" && mkdir -p "$w"
  cat >"$w/gpt2.json" <<JSON
{"model": {"vocab_size": 50257, "max_seq_len": 512, "n_layer": 12, "n_head": 12, "n_embd": 768},
 "data": {"dir": "$B/data/kjv", "seq_len": 512, "batch_size": 8, "seed": 1, "verify_checksums": false},
 "optim": {"lr": 3.0e-4, "warmup_steps": 0},
 "train": {"steps": 6, "log_every": 1, "eval_every": 0, "eval_batches": 1, "kernels": "cuda", "dtype": "bf16",
           "resume": "none"}}
JSON
  local -A sets=([0]="--set dist.zero=0" [3]="--set dist.zero=3" [3r]="--set dist.zero=3 --set train.recompute=full"
                 [3o]="--set dist.zero=3 --set train.recompute=full --set train.offload_activations=true")
  for z in 0 3 3r 3o; do
    # shellcheck disable=SC2086
    timeout -k 5 120 "$B/run.sh" anneal train --config "$w/gpt2.json" ${sets[$z]} >"$w/z$z.log" 2>&1 &
    pid=$!
    nv=$(gpu_peak $pid)
    wait $pid || { tail -5 "$w/z$z.log"; return 1; }
    line=$(grep "memory of rank 0 " "$w/z$z.log")
    peak=$(sed -nE 's/.*: peak ([0-9.]+) MB allocated.*/\1/p' <<<"$line")
    formula=$(sed -nE 's/.*mark\), formula ([0-9.]+) MB.*/\1/p' <<<"$line")
    dev=$(sed -nE 's/.*formula [0-9.]+ MB \(([+-][0-9.]+)%\).*/\1/p' <<<"$line")
    ms=$(grep -E '^step +[0-9]+/' "$w/z$z.log" | tail -n +3 | sed -E 's/.* ([0-9.]+) ms .*/\1/' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    # shellcheck disable=SC2086
    plan=$(timeout -k 5 30 "$B/run.sh" anneal plan --config "$w/gpt2.json" --world 1 --unit MB ${sets[$z]} | awk '$1 == "0" { print $(NF-1) }')
    echo "ZeRO $z (r: full recomputation; o: and activations offloaded, copies overlapped on the copy stream): allocator peak $peak MB, formula $formula MB ($dev %), anneal plan $plan MB, device memory peak $nv MiB, step $ms ms"
    awk -v d="$dev" 'BEGIN { exit !(d + 0 <= 5 && d + 0 >= -5) }' || bad=1
  done
  echo "zero: GPT-2 124M bf16 B=8 T=512 on one GPU, ZeRO 0, 3, 3 with full recomputation, and with offload too (its step time beside 3r's is offload's cost): allocator peaks within 5 % of the formula: $([ $bad = 0 ] && echo ok || echo FAIL)"
  return $bad
}

run_stage probe
run_stage load
# The fallback build when the bundle did not load (or when --stages names it).
if want load && [[ ${SUMMARY[-1]:-} == load*FAIL* ]]; then STAGES=$STAGES,fallback; fi
IFS=, read -r -a order <<<"$ORDER"
for stage in "${order[@]}"; do
  case $stage in probe | load) ;; *) run_stage "$stage" ;; esac
done
printf '%s\n' "${SUMMARY[@]}" >"$OUT/summary.txt"
echo "=== summary ($SECONDS s)"
cat "$OUT/summary.txt"
