#!/bin/bash
# A checkpoint written on a GPU resumes on the CPU (issue 18; one checkpoint format on every device):
# tests/e2e/golden/gpu_fixture/step-00000002 is the golden fixture run (tests/e2e/golden_test.sh's
# fix config: 1 layer, C=8) trained 2 steps with train.kernels=cuda, f32, by bench/gpu/device_check.sh's
# step stage on the lent GPU (it returns gpu_fixture_step2.tgz; kept here unpacked). Resumed on the
# CPU engine to step 4, its losses are the CPU fixture's golden ones (fixture_resume) within 1e-5
# relative. Skipped (exit 77) until such a checkpoint has been brought back from a GPU.
source "$(dirname "$0")/lib.sh"
GPU_FIX=tests/e2e/golden/gpu_fixture
[ -f "$GPU_FIX/step-00000002/manifest.json" ] ||
  skip "no GPU checkpoint kept at $GPU_FIX: run bench/gpu/device_check.sh --stages load,step on a GPU, unpack its gpu_fixture_step2.tgz there"
"$ANNEAL" prep --input data/kjv --output "$TMP/ds" --val-fraction 0.05 --unit-mb 1 --quiet >/dev/null
fixture_config "$TMP/ds" >"$TMP/fix.yaml"
mkdir -p "$TMP/run" && cp -r "$GPU_FIX/step-00000002" "$TMP/run/"
check "the GPU checkpoint verifies on the CPU" "$ANNEAL" ckpt verify "$TMP/run" --step 2
OMP_NUM_THREADS=1 "$ANNEAL" train --config "$TMP/fix.yaml" --set train.checkpoint_dir="$TMP/run" >"$TMP/run.log" 2>&1
rc=$?
check "the CPU engine resumes it (exit $rc): $(tail -c 200 "$TMP/run.log" | tr '\n' ' ')" \
  grep -q "resumed from .*step-00000002" "$TMP/run.log"
want=$(awk '$1 == "fixture_resume" { print $2 }' "$GOLDEN")
python3 - "$TMP/run.log" "$want" >"$TMP/cmp.txt" <<'PY'
import re, sys
got = {int(m.group(1)): float.fromhex(m.group(2))
       for m in re.finditer(r"^step +(\d+)/\d+ \| loss [0-9.]+ \((0x[^)]+)\)", open(sys.argv[1]).read(), re.M)}
ref = {int(k): float.fromhex(v) for k, v in (p.split(":") for p in sys.argv[2][len("losses="):].split(","))}
worst = max(abs(got[s] - ref[s]) / abs(ref[s]) if s in got else float("inf") for s in ref)
print(f"worst relative loss error {worst:.2e} over steps {sorted(ref)}")
sys.exit(0 if worst <= 1e-5 else 1)
PY
cmp_rc=$?  # saved before the check's own command substitution resets $?
check "... and its losses at steps 3-4 are the CPU fixture's within 1e-5 ($(cat "$TMP/cmp.txt"))" test $cmp_rc -eq 0
finish
