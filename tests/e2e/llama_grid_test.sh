#!/bin/bash
# The Llama family at every layout computes the same training as one process: (dp, tp, pp) in
# {1,2}^3, each once (ZeRO-1 where dp = 2 with pipelining, ZeRO-2 where dp = 2 without; two
# micro-batches; recomputation alternating none / full / selective), for a Llama with 4 query and 2
# key/value heads, an untied head and an MLP width that is not 4C; plus n_kv_head 1 at tp 2 (the one
# key/value head replicated on both ranks) with sequence parallelism. Each run's first 5 losses equal
# one process on the same global batch within 1e-5 relative and its final parameters as
# dist3d_grid_test.sh bounds them (tests/e2e/dist_compare.py). Resharding: saved at (2, 2, 1), the
# next step at (1, 2, 2) and (1, 1, 1) equals the (2, 2, 1) continuation's within 1e-6. kill -9 in
# the middle of a run, then resume: the final state hash equals an uninterrupted run's. bf16 (the ref
# backend's emulation, one rank) within 1e-3 of fp32 per step. The demo config
# (examples/kjv_llama_tiny.yaml) trains 20 steps and samples.
source "$(dirname "$0")/lib.sh"
CMP="/usr/bin/python3 $(dirname "$0")/dist_compare.py"
"$ANNEAL" prep --input data/kjv --output "$TMP/ds" --val-fraction 0.05 --unit-mb 1 --quiet >/dev/null
cat >"$TMP/cfg.yaml" <<YAML
model: {family: llama, vocab_size: 50257, max_seq_len: 32, n_layer: 2, n_head: 4, n_kv_head: 2, n_embd: 32,
        intermediate_size: 48, rope_theta: 500000, tie_embeddings: false}
data: {dir: $TMP/ds, seq_len: 32, batch_size: 2, seed: 3}
optim: {lr: 3.0e-3, warmup_steps: 2, eps: 1.0e-6}
train: {steps: 5, log_every: 1, eval_every: 0, eval_batches: 2, seed: 11, peak_gflops: 100, threads: 1, resume: none}
dist: {timeout_s: 60}
YAML
export OMP_NUM_THREADS=1
for global in 2 4; do  # one-process references: B=2, accum = micro-batches x dp
  "$ANNEAL" train --config "$TMP/cfg.yaml" --set train.grad_accum=$global \
    --set train.checkpoint_dir="$TMP/ref$global" >"$TMP/ref$global.log" 2>&1 || bad "reference accum $global"
done
check "the model line names the Llama shape" grep -q "Llama L=2 H=4 KV=2 C=32 F=48 untied" "$TMP/ref2.log"
runs=0 recomputes=(none full selective)
compare() {  # name, run dir, reference accumulation
  local l p
  if l=$($CMP losses "$TMP/ref$3.log" "$2.log" 5 1e-5) && p=$($CMP params "$TMP/ref$3/step-00000005" "$2/step-00000005"); then
    ok "$1: $l; $p"
  else
    bad "$1: ${l:-} ${p:-} $(grep -i error "$2.log" | head -2)"
  fi
}
for dp in 1 2; do for tp in 1 2; do for pp in 1 2; do
  zero=0
  [ $dp -eq 2 ] && zero=$([ $pp -eq 1 ] && echo $((tp + 1)) || echo 1)  # ZeRO-2 at tp 1, ZeRO-3 at tp 2
  rc=${recomputes[$((runs % 3))]}
  run="$TMP/g_${dp}${tp}${pp}"
  timeout 300 "$ANNEAL" launch --nproc-per-node $((dp * tp * pp)) -- "$ANNEAL" train --config "$TMP/cfg.yaml" \
    --set dist.tp=$tp --set dist.pp=$pp --set dist.zero=$zero --set train.grad_accum=2 \
    --set train.recompute=$rc --set train.checkpoint_dir="$run" >"$run.log" 2>&1 || true
  runs=$((runs + 1))
  compare "llama dp=$dp tp=$tp pp=$pp zero=$zero micro=2 recompute=$rc" "$run" $((2 * dp))
done; done; done
check "llama: every rank of the grid allocated exactly its memory formula ($(memory_formula_holds "$TMP"/g_*.log))" \
  memory_formula_holds "$TMP"/g_*.log
# Llama in bf16 at tp 2, sequence parallel (RMSNorm weight gradients and rotary q/k in bf16, the
# group's sums in fp32 rounded once): the one-process bf16 run's losses within 1e-4 (measured 2.2e-5).
"$ANNEAL" train --config "$TMP/cfg.yaml" --set train.dtype=bf16 --set train.kernels=ref --set train.grad_accum=2 \
  --set train.checkpoint_dir= >"$TMP/bf16_ref.log" 2>&1 || bad "llama bf16 reference: exit $?"
timeout 300 "$ANNEAL" launch --nproc-per-node 2 -- "$ANNEAL" train --config "$TMP/cfg.yaml" --set train.dtype=bf16 \
  --set train.kernels=ref --set train.grad_accum=2 --set dist.tp=2 --set dist.sequence_parallel=true \
  --set train.checkpoint_dir= >"$TMP/bf16_tp2.log" 2>&1 || bad "llama bf16 at tp 2: exit $?"
check "llama bf16 at tp 2, sequence parallel: losses within 1e-4 relative of one process in bf16" \
  $CMP losses "$TMP/bf16_ref.log" "$TMP/bf16_tp2.log" 5 1e-4
run="$TMP/mqa"
sed 's/n_kv_head: 2/n_kv_head: 1/' "$TMP/cfg.yaml" >"$TMP/mqa.yaml"
"$ANNEAL" train --config "$TMP/mqa.yaml" --set train.grad_accum=2 --set train.checkpoint_dir="$TMP/mqa_ref" \
  >"$TMP/mqa_ref.log" 2>&1 || bad "reference with one key/value head"
timeout 300 "$ANNEAL" launch --nproc-per-node 2 -- "$ANNEAL" train --config "$TMP/mqa.yaml" --set dist.tp=2 \
  --set dist.sequence_parallel=true --set train.grad_accum=2 --set train.checkpoint_dir="$run" >"$run.log" 2>&1 || true
cp "$TMP/mqa_ref.log" "$TMP/refmqa.log"
ln -s "$TMP/mqa_ref" "$TMP/refmqa"
compare "llama n_kv_head=1 at tp=2 (replicated key/value head), sequence parallel" "$run" mqa
check "the replicated key/value head is written once, whole" bash -c \
  "python3 -c \"import json,sys; t=json.load(open('$run/step-00000005/manifest.json'))['tensors']['param.h.0.attn.k.weight']; sys.exit(len(t['parts']) != 1 or t['shape'] != [8, 32])\""

# Resharding: 4 steps at (2, 2, 1) with ZeRO-1, then step 5 at (2, 2, 1), (1, 2, 2) and (1, 1, 1) (B=4).
timeout 300 "$ANNEAL" launch --nproc-per-node 4 -- "$ANNEAL" train --config "$TMP/cfg.yaml" --set dist.tp=2 --set dist.zero=1 \
  --set train.steps=4 --set train.resume=auto --set train.checkpoint_dir="$TMP/rs" >"$TMP/rs.log" 2>&1 || bad "reshard: first part"
for layout in "2 2 1 1 2" "1 2 2 0 4" "1 1 1 0 4"; do
  set -- $layout
  d="$TMP/rs_$1$2$3"
  cp -r "$TMP/rs" "$d"
  timeout 300 "$ANNEAL" launch --nproc-per-node $(($1 * $2 * $3)) -- "$ANNEAL" train --config "$TMP/cfg.yaml" --set dist.tp=$2 \
    --set dist.pp=$3 --set dist.zero=$4 --set data.batch_size=$5 --set train.resume=auto --set train.checkpoint_dir="$d" \
    >"$d.log" 2>&1 || bad "reshard: resume at (dp,tp,pp) = ($1,$2,$3): $(grep -i error "$d.log" | head -2)"
done
for layout in 122 111; do
  check "reshard: resumed at (dp,tp,pp) = (${layout:0:1},${layout:1:1},${layout:2:1}): step 5's loss equals the (2,2,1) continuation's" \
    $CMP losses "$TMP/rs_221.log" "$TMP/rs_$layout.log" 1 1e-6
done

# kill -9 after step 6's checkpoint (a larger batch and a longer run, so the kill lands mid-run),
# resume: the same final state as a run never interrupted.
long=(--set train.steps=40 --set data.batch_size=8 --set train.checkpoint_every=3 --set train.resume=auto)
"$ANNEAL" train --config "$TMP/cfg.yaml" "${long[@]}" --set train.checkpoint_dir="$TMP/straight" \
  >"$TMP/straight.log" 2>&1 || bad "uninterrupted run"
"$ANNEAL" train --config "$TMP/cfg.yaml" "${long[@]}" --set train.checkpoint_dir="$TMP/killed" >"$TMP/killed1.log" 2>&1 &
pid=$!
for _ in $(seq 400); do [ -f "$TMP/killed/step-00000006/manifest.json" ] && break; sleep 0.05; done
check "kill -9 lands mid-run" kill -9 $pid
wait $pid 2>/dev/null
"$ANNEAL" train --config "$TMP/cfg.yaml" "${long[@]}" --set train.checkpoint_dir="$TMP/killed" >"$TMP/killed2.log" 2>&1 ||
  bad "resume after kill -9"
check "the killed run resumed from a checkpoint before step 40" grep -qE "resumed from .*step-000000([0-3][0-9])" "$TMP/killed2.log"
check "kill -9 and resume: the final state hash equals the uninterrupted run's" bash -c "
  a=\$(grep -o 'state hash.*' '$TMP/straight.log'); b=\$(grep -o 'state hash.*' '$TMP/killed2.log')
  echo \"\$a | \$b\"; [ -n \"\$a\" ] && [ \"\$a\" = \"\$b\" ]"

# bf16 on one rank (ref's emulated bf16 ops) against fp32 on ref, 8 steps
"$ANNEAL" train --config "$TMP/cfg.yaml" --set train.kernels=ref --set train.steps=8 --set train.checkpoint_dir="$TMP/r32" \
  >"$TMP/r32.log" 2>&1 || bad "ref fp32 run"
"$ANNEAL" train --config "$TMP/cfg.yaml" --set train.kernels=ref --set train.dtype=bf16 --set train.steps=8 \
  --set train.checkpoint_dir="$TMP/r16" >"$TMP/r16.log" 2>&1 || bad "ref bf16 run: $(tail -2 "$TMP/r16.log")"
check "llama in bf16: losses within 1e-3 relative of fp32 at every step" $CMP losses "$TMP/r32.log" "$TMP/r16.log" 8 1e-3

# The demo's config: 20 steps on the prepared corpus, then a sample from its checkpoint.
timeout 300 "$ANNEAL" train --config examples/kjv_llama_tiny.yaml --set data.dir="$TMP/ds" --set train.steps=20 \
  --set train.eval_every=20 --set train.checkpoint_dir="$TMP/demo" >"$TMP/demo.log" 2>&1 || bad "the demo config: $(tail -2 "$TMP/demo.log")"
check "the demo config trains llama-tiny and lowers the loss" bash -c "
  grep -q 'Llama L=4 H=4 KV=2 C=128 F=384' '$TMP/demo.log' &&
  a=\$(grep -E '^step +10/' '$TMP/demo.log' | sed -E 's/.*\| loss ([0-9.]+) .*/\1/'); b=\$(grep -E '^step +20/' '$TMP/demo.log' | sed -E 's/.*\| loss ([0-9.]+) .*/\1/')
  echo \"loss \$a at step 10, \$b at step 20\"; awk -v a=\"\$a\" -v b=\"\$b\" 'BEGIN { exit !(b + 0 < a + 0) }'"
check "a sample from the demo's checkpoint" bash -c \
  "'$ANNEAL' sample --checkpoint '$TMP/demo' --prompt 'And God said' --max-tokens 8 --seed 3 | grep -q 'And God said'"

expect_exit "tp neither dividing n_kv_head nor a multiple of it is refused" 2 "dist.tp = 4 neither divides model.n_kv_head = 3" \
  "$ANNEAL" launch --nproc-per-node 4 -- "$ANNEAL" train --config "$TMP/cfg.yaml" --set model.n_head=12 --set model.n_kv_head=3 \
  --set model.n_embd=48 --set dist.tp=4
expect_exit "n_kv_head must divide n_head" 2 "n_kv_head 3 does not divide n_head 4" \
  "$ANNEAL" train --config "$TMP/cfg.yaml" --set model.n_kv_head=3
expect_exit "an odd head size cannot rotate" 2 "is odd: rotary embeddings rotate pairs" \
  "$ANNEAL" train --config "$TMP/cfg.yaml" --set model.n_head=32 --set model.n_kv_head=32
finish
