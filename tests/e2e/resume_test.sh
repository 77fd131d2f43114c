#!/usr/bin/env bash
# Bit-identical resume: an uninterrupted run against one killed with kill -9 at 5 moments (4 at
# seeded random times, 1 between a checkpoint's shard and its manifest) and resumed each time with
# resume: auto. Every logged loss must be equal as a hex float, and the final hash of parameters
# and both Adam moments equal. Also: bad input to anneal train exits 2 and names the problem.
source "$(dirname "$0")/lib.sh"
export OMP_NUM_THREADS=2
"$ANNEAL" prep --input data/kjv --output "$TMP/ds" --val-fraction 0.05 --unit-mb 1 --quiet >/dev/null
cat >"$TMP/cfg.yaml" <<YAML
model: {vocab_size: 50257, max_seq_len: 32, n_layer: 2, n_head: 2, n_embd: 32}
data: {dir: $TMP/ds, seq_len: 32, batch_size: 4, seed: 7}
optim: {lr: 3.0e-3, warmup_steps: 5}
train: {steps: 60, log_every: 1, eval_every: 20, eval_batches: 2, checkpoint_every: 4, resume: auto, seed: 99}
YAML
losses() { grep -E '^step +[0-9]+/' "$@" | sed -E 's/^step +([0-9]+)\/.*\((0x[^)]*)\).*/\1 \2/' | sort -n -u; }

"$ANNEAL" train --config "$TMP/cfg.yaml" --set train.checkpoint_dir="$TMP/ref_ckpt" >"$TMP/ref.log" 2>&1
check "uninterrupted run completes" grep -q "state hash" "$TMP/ref.log"
ref_hash=$(sed -nE 's/.*state hash.*: ([0-9a-f]+)/\1/p' "$TMP/ref.log")

CK="$TMP/ckpt"; : >"$TMP/all.log"
# Kill points: random steps drawn per run, increasing (each attempt resumes and must get past the
# last), each followed by a random extra delay so the kill lands anywhere inside a step or a
# checkpoint. The seed is printed; RESUME_SEED=N replays a run's kill points.
seed=${RESUME_SEED:-$(( $(date +%s%N) % 1000000007 ))}
echo "kill points drawn with RESUME_SEED=$seed"
RANDOM=$seed
kills=0 target=0
for i in 1 2 3 4; do
  target=$((target + 3 + RANDOM % 8))
  extra=$(awk -v r=$RANDOM 'BEGIN { printf "%.3f", (r % 50) / 1000 }')
  "$ANNEAL" train --config "$TMP/cfg.yaml" --set train.checkpoint_dir="$CK" >"$TMP/attempt$i.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 6000); do
    grep -qE "^step +$target/" "$TMP/attempt$i.log" && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.01
  done
  sleep "$extra"
  if kill -9 $pid 2>/dev/null; then kills=$((kills + 1)); echo "  attempt $i killed after step $target (+${extra}s)"; fi
  wait $pid 2>/dev/null
  cat "$TMP/attempt$i.log" >>"$TMP/all.log"
done
# The fifth kill: inside the checkpoint of step 44, after its shard file, before its manifest — by
# the tests' binary (its fault:// store kills the process before that Put; tests/testing/fault_store.cc).
ANNEAL_FAULTS=$(readlink -f "${2:-$(dirname "$ANNEAL")/../tests/anneal_faults}")
"$ANNEAL_FAULTS" train --config "$TMP/cfg.yaml" \
  --set train.checkpoint_dir="fault://$CK?kill_before=step-00000044/manifest.json" >>"$TMP/all.log" 2>&1
rc=$?
check "fault-injected kill inside a checkpoint (exit $rc)" test "$rc" -eq 137
check "torn checkpoint left without a manifest" test -f "$CK/step-00000044/attempt-0/model.safetensors" -a ! -f "$CK/step-00000044/manifest.json"
"$ANNEAL" train --config "$TMP/cfg.yaml" --set train.checkpoint_dir="$CK" >"$TMP/last.log" 2>&1
cat "$TMP/last.log" >>"$TMP/all.log"
check "resume skipped the torn step-44 checkpoint" grep -q "resumed from $CK/step-00000040" "$TMP/last.log"
check "at least 4 random kills landed ($kills)" test "$kills" -ge 4
# Every step's loss, from every attempt, equals the uninterrupted run's (as hex floats).
check "the uninterrupted run logged 60 losses" test "$(losses "$TMP/ref.log" | wc -l)" -eq 60
if diff <(losses "$TMP/ref.log") <(losses "$TMP/all.log") >"$TMP/diff"; then ok "all 60 losses bit-identical across kills"
else bad "losses differ: $(head -5 "$TMP/diff")"; fi
dups=$(grep -E '^step +[0-9]+/' "$TMP/all.log" | sed -E 's/^step +([0-9]+)\/.*\((0x[^)]*)\).*/\1 \2/' | sort -u | awk '{print $1}' | uniq -d | wc -l)
check "a step recomputed after a resume logged the same loss" test "$dups" -eq 0
new_hash=$(sed -nE 's/.*state hash.*: ([0-9a-f]+)/\1/p' "$TMP/last.log")
check "final parameters and Adam moments identical ($new_hash)" test -n "$new_hash" -a "$new_hash" = "$ref_hash"

# Bad input: exit 2 naming the problem; complete checkpoints untouched.
before=$(cat "$CK"/step-00000060/manifest.json | md5sum)
expect_exit "checkpoint of another shape" 2 "holds a model of shape" \
  "$ANNEAL" train --config "$TMP/cfg.yaml" --set train.checkpoint_dir="$CK" --set model.n_embd=64
check "existing checkpoint unchanged" test "$before" = "$(cat "$CK"/step-00000060/manifest.json | md5sum)"
printf '\x00' | dd of="$CK/step-00000060/attempt-0/model.safetensors" bs=1 seek=100000 conv=notrunc 2>/dev/null
expect_exit "corrupt checkpoint" 2 "fails its checksum.*delete" \
  "$ANNEAL" train --config "$TMP/cfg.yaml" --set train.checkpoint_dir="$CK" --set train.steps=70
expect_exit "data of another vocabulary" 2 "vocabulary 50257.* 1000" \
  "$ANNEAL" train --config "$TMP/cfg.yaml" --set model.vocab_size=1000 --set train.checkpoint_dir=
expect_exit "sequence longer than the model's" 2 "longer than the model's max_seq_len" \
  "$ANNEAL" train --config "$TMP/cfg.yaml" --set data.seq_len=64
expect_exit "n_embd not divisible by n_head" 2 "not divisible by n_head" \
  "$ANNEAL" train --config "$TMP/cfg.yaml" --set model.n_head=3
expect_exit "unknown key names the closest" 2 "did you mean 'train.steps'" \
  "$ANNEAL" train --config "$TMP/cfg.yaml" --set train.step=3
# SIGTERM (SIGINT, Ctrl-C): the run finishes its step, saves a checkpoint and exits 143 (130), the
# code of a program that signal ended, naming the step and the checkpoint to resume from.
for sig in TERM INT; do
  "$ANNEAL" train --config "$TMP/cfg.yaml" --set train.checkpoint_dir="$TMP/$sig" --set train.checkpoint_every=0 >"$TMP/$sig.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 6000); do grep -qE "^step +5/" "$TMP/$sig.log" && break; sleep 0.01; done
  kill -$sig $pid; wait $pid; rc=$?
  want=$([ $sig = TERM ] && echo 143 || echo 130)
  check "SIG$sig exits $want (exit $rc)" test "$rc" -eq "$want"
  check "SIG$sig saved a checkpoint" grep -q "stop requested: saving a checkpoint" "$TMP/$sig.log"
  check "... and says so: interrupted, the step, the checkpoint" \
    grep -qE "^anneal: interrupted: by SIG$sig at step [0-9]+: checkpoint $TMP/$sig/step-[0-9]+ saved" "$TMP/$sig.log"
  check "the saved checkpoint is complete" test -n "$(ls "$TMP"/$sig/step-*/manifest.json 2>/dev/null)"
done
# Ctrl-C on `anneal launch` (SIGINT to its process group, as a terminal sends it): the ranks are
# sent SIGTERM, checkpoint, and the launcher exits 130 saying where they stopped; never "failed".
setsid "$ANNEAL" launch --nproc-per-node 2 -- "$ANNEAL" train --config "$TMP/cfg.yaml" --set train.checkpoint_dir="$TMP/lint" \
  --set train.checkpoint_every=0 >"$TMP/lint.log" 2>&1 &
pid=$!
for _ in $(seq 1 6000); do grep -qE "step +5/" "$TMP/lint.log" && break; sleep 0.01; done
kill -INT -- -$pid; wait $pid; rc=$?
check "Ctrl-C on anneal launch exits 130 (exit $rc)" test "$rc" -eq 130
check "... saying it was interrupted and where rank 0 saved" \
  grep -qE "^anneal: interrupted: by SIGINT.*rank 0: .*at step [0-9]+: checkpoint $TMP/lint/step-[0-9]+ saved" "$TMP/lint.log"
check "... never that the attempt failed" bash -c "! grep -qE 'failed|internal error' '$TMP/lint.log'"
out=$("$ANNEAL" sample --checkpoint "$TMP/ref_ckpt" --prompt "In the beginning" --max-tokens 8 --seed 3)
check "sample prints a continuation" test "$(wc -c <<<"$out")" -gt 20
finish
