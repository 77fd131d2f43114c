#!/usr/bin/env bash
# e2e.device_check: bench/gpu/device_check.sh, the one script a lent GPU machine runs, exercised here
# end to end with stub binaries (no GPU): a stub nvidia-smi on PATH and a stub bundle whose run.sh knows
# only `anneal --version` (at another commit than the tree's) — every stage after load fails quickly.
# Checked: the stages run in the order that puts the figures that matter first; a failing stage is
# noted and the next one runs; the stale bundle is warned about, not rebuilt; the deadline skips every
# stage that would not fit (noted "skip", with the seconds lacking) and the whole call ends inside it;
# summary.txt is already written while a later stage runs; $OUT holds fewer than 8 plain files.
source "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.."
stub=$TMP/stub
mkdir -p "$stub/path" "$stub/bundle/bin"
cat >"$stub/path/nvidia-smi" <<'SH'
#!/bin/bash
sleep "${STUB_SMI_SLEEP:-0}"
case "$*" in
  *memory.used*) echo 1000 ;;
  *name*) echo "NVIDIA H100 80GB HBM3" ;;
  *) echo "stub nvidia-smi $*" ;;
esac
SH
# The bundle's runner: anneal --version at another commit; any other run copies the summary written
# so far (the first time) and fails, as a binary that cannot reach a GPU would.
cat >"$stub/bundle/run.sh" <<SH
#!/bin/bash
if [ "\$1 \${2:-}" = "anneal --version" ]; then echo "anneal 0.0 (commit 0123456789ab)"; exit 0; fi
[ "\$1" = --ldd ] && exit 0
[ -f "$TMP/summary_seen" ] || cp "\$OUT/summary.txt" "$TMP/summary_seen" 2>/dev/null || touch "$TMP/summary_seen"
echo "stub: \$1 cannot run here (no GPU)" >&2
exit 1
SH
chmod +x "$stub/path/nvidia-smi" "$stub/bundle/run.sh"
tar -C "$stub/bundle" -czf "$stub/bundle.tgz" .
run_check() {  # OUT DEADLINE_S [ENV...]
  local out=$1 deadline=$2
  shift 2
  env "$@" PATH="$stub/path:$PATH" OUT="$out" BUNDLE="$stub/bundle.tgz" DEADLINE_S="$deadline" \
    timeout -k 5 $((deadline + 60)) bash bench/gpu/device_check.sh >"$out.log" 2>&1
}

t0=$SECONDS
# 100 s: the stages that fail at once leave it all, so those whose usual length is over 100 s (llama
# 120, memcheck 150) are skipped from the start and the others run.
run_check "$TMP/out" 100
took=$((SECONDS - t0))
check "the check ran to its summary in $took s (deadline 100 s)" grep -q '^=== summary' "$TMP/out.log"
check "... inside its deadline" test "$took" -le 100
order=$(grep -oE '^=== [a-z]+' "$TMP/out/stages.log" | cut -c5- | tr '\n' ' ')
check "stages in order, the figures that matter first: $order" \
  test "$order" = "probe load step parity bench torch ceilings zero hf "
check "a stale bundle is warned about, load passes (no rebuild)" \
  grep -qE '^load +ok +load: warning: the bundle was built at 0123456789ab' "$TMP/out/summary.txt"
check "... and the fallback build did not run" sh -c "! grep -q '^fallback' '$TMP/out/summary.txt'"
check "the failing step stage is noted FAIL and the next stages still ran" \
  sh -c "grep -q '^step  *FAIL' '$TMP/out/summary.txt' && grep -q '^parity  *FAIL' '$TMP/out/summary.txt'"
check "a gtest filter run against a binary that lists no test fails (gtest_run), not passes" \
  grep -q "selects no test" "$TMP/out/stages.log"
for s in llama memcheck; do
  check "$s skipped for the deadline, naming the seconds left and needed" \
    grep -qE "^$s +skip +deadline: [0-9]+ s left of 100, the stage needs about [0-9]+ s" "$TMP/out/summary.txt"
done
check "torch, without bench's figures, fails saying so" \
  grep -qE '^torch +FAIL +torch: bench did not finish' "$TMP/out/summary.txt"
check "summary.txt was written before a later stage ran (probe and load in it)" \
  sh -c "grep -q '^probe' '$TMP/summary_seen' && grep -q '^load' '$TMP/summary_seen'"
files=$(find "$TMP/out" -mindepth 1 | wc -l)
check "\$OUT holds $files plain files, fewer than 8: $(ls "$TMP/out" | tr '\n' ' ')" \
  sh -c "[ $files -lt 8 ] && [ -z \"\$(find '$TMP/out' -mindepth 1 ! -type f)\" ]"

# A deadline the probe alone uses up: nothing else starts.
t0=$SECONDS
run_check "$TMP/out2" 8 STUB_SMI_SLEEP=3
took=$((SECONDS - t0))
check "with 8 s and a slow nvidia-smi: only probe ran ($took s)" \
  test "$(grep -c '^=== [a-z]' "$TMP/out2/stages.log")" -eq 1
check "... and every other stage is noted skip" \
  test "$(grep -cE '^[a-z]+ +skip +deadline' "$TMP/out2/summary.txt")" -eq 10
finish
