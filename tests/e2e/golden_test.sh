#!/bin/bash
# The CPU engine's results, bit for bit, against tests/e2e/golden/runs-VENDOR.txt (recorded once, at the
# commit its header names; the device-seam refactor and everything after it must not move a bit):
#   single_t1, single_t2   one process at 1 and at 2 threads: every step's loss (hex) and the final
#                          hash of parameters and Adam moments
#   zero1_dp2, zero2_dp2   2 ranks with ZeRO-1 and ZeRO-2 (rank 0's hash)
#   fixture_resume         the checkpoint kept in tests/e2e/golden/fixture/ (written at the recording
#                          commit, step 2) resumed to step 4
#   sample                 `anneal sample` from that checkpoint with a fixed seed: the same text
# The (dp, tp, pp) grid's golden lines are checked by dist3d_grid_test.sh, which runs those runs.
# GOLDEN_RECORD=1 re-records (tests/e2e/golden_lib.sh says when it may; never to make a change pass).
source "$(dirname "$0")/lib.sh"
FIX=$(dirname "$GOLDEN")/fixture
"$ANNEAL" prep --input data/kjv --output "$TMP/ds" --val-fraction 0.05 --unit-mb 1 --quiet >/dev/null
cat >"$TMP/cfg.yaml" <<YAML
model: {vocab_size: 50257, max_seq_len: 32, n_layer: 2, n_head: 2, n_embd: 32}
data: {dir: $TMP/ds, seq_len: 32, batch_size: 4, seed: 7}
optim: {lr: 3.0e-3, warmup_steps: 2}
train: {steps: 6, log_every: 1, eval_every: 3, eval_batches: 2, seed: 99, resume: none, peak_gflops: 100}
dist: {timeout_s: 60}
YAML
if [ "${GOLDEN_RECORD_FIXTURE:-0}" = 1 ] && [ "${GOLDEN_RECORD:-0}" != 1 ]; then
  echo "GOLDEN_RECORD_FIXTURE=1 needs GOLDEN_RECORD=1 (and its conditions: tests/e2e/golden_lib.sh)" >&2; exit 2
fi
if [ "${GOLDEN_RECORD:-0}" = 1 ]; then golden_record_guard; GOLDEN_GUARDED=1; golden_write_header; fi
for t in 1 2; do
  OMP_NUM_THREADS=$t "$ANNEAL" train --config "$TMP/cfg.yaml" --set train.threads=$t \
    --set train.checkpoint_dir="$TMP/s$t" >"$TMP/s$t.log" 2>&1 || bad "single_t$t: exit $?"
  golden_check single_t$t "$TMP/s$t.log"
done
for z in 1 2; do
  OMP_NUM_THREADS=1 timeout 300 "$ANNEAL" launch --nproc-per-node 2 -- "$ANNEAL" train --config "$TMP/cfg.yaml" \
    --set train.threads=1 --set dist.zero=$z --set train.checkpoint_dir="$TMP/z$z" >"$TMP/z$z.log" 2>&1 || bad "zero$z: exit $?"
  golden_check zero${z}_dp2 "$TMP/z$z.log"
done

# The fixture: a 1-layer model (C=8) trained 2 steps, its checkpoint kept in the tree.
fixture_config "$TMP/ds" >"$TMP/fix.yaml"
if [ "${GOLDEN_RECORD_FIXTURE:-0}" = 1 ]; then
  OMP_NUM_THREADS=1 "$ANNEAL" train --config "$TMP/fix.yaml" --set train.steps=2 \
    --set train.checkpoint_dir="$TMP/fixrec" >"$TMP/fixrec.log" 2>&1 || bad "fixture: exit $?"
  rm -rf "$FIX" && mkdir -p "$FIX" && cp -r "$TMP/fixrec/step-00000002" "$FIX/"
fi
cp -r "$FIX" "$TMP/fixrun"
OMP_NUM_THREADS=1 "$ANNEAL" train --config "$TMP/fix.yaml" --set train.checkpoint_dir="$TMP/fixrun" \
  >"$TMP/fixrun.log" 2>&1 || bad "fixture resume: exit $?"
check "the fixture run resumed from the kept step-2 checkpoint" grep -q "resumed from .*step-00000002" "$TMP/fixrun.log"
golden_check fixture_resume "$TMP/fixrun.log"

OMP_NUM_THREADS=1 "$ANNEAL" sample --checkpoint "$FIX/step-00000002" --prompt "In the beginning" --max-tokens 24 \
  --temperature 0.9 --top-k 40 --seed 1234 >"$TMP/sample.txt" 2>"$TMP/sample.err" || bad "sample: exit $?: $(cat "$TMP/sample.err")"
if [ "${GOLDEN_RECORD_FIXTURE:-0}" = 1 ]; then cp "$TMP/sample.txt" "$(dirname "$GOLDEN")/sample.txt"; ok "golden sample recorded"
elif cmp -s "$TMP/sample.txt" "$(dirname "$GOLDEN")/sample.txt"; then ok "golden sample identical: $(head -c 80 "$TMP/sample.txt")"
else bad "golden sample differs: got '$(cat "$TMP/sample.txt")', want '$(cat "$(dirname "$GOLDEN")/sample.txt")'"; fi
finish
