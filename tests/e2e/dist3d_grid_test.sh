#!/bin/bash
# Tensor and pipeline parallelism compute the same training as one process. The grid
# (dp, tp, pp) in {1,2}^3 x the legal ZeRO stages (0 at dp=1; 0, 1, 2 at dp=2 without pipelining;
# 0, 1 with it) x micro-batches in {1, 4} x activation recomputation in {none, full}, on up to 8
# processes: each run's first 5 losses equal one process on the same global batch (B x accum x dp)
# within 1e-5 relative, and its final parameters within 1e-5*|p| + 1e-7*sqrt(n)
# (tests/e2e/dist_compare.py assembles each tensor from the boxes every rank wrote). optim.eps is
# 1e-6 for the reason given in dist_grid_test.sh.
# Every run's losses (hex) and rank 0's final state hash also equal tests/e2e/golden/runs-VENDOR.txt's (golden_lib.sh).
# Resharding: saved at (dp, tp, pp) = (2, 2, 1), resumed at (1, 2, 2), (1, 1, 1) and (1, 4, 1) with
# the same global batch: step 5's loss equals the (2, 2, 1) continuation's within 1e-6 relative.
# Bad combinations fail before anything is allocated (exit 2, the reason in the message).
source "$(dirname "$0")/lib.sh"
CMP="/usr/bin/python3 $(dirname "$0")/dist_compare.py"
"$ANNEAL" prep --input data/kjv --output "$TMP/ds" --val-fraction 0.05 --unit-mb 1 --quiet >/dev/null
cat >"$TMP/cfg.yaml" <<YAML
model: {vocab_size: 50257, max_seq_len: 32, n_layer: 2, n_head: 4, n_embd: 32}
data: {dir: $TMP/ds, seq_len: 32, batch_size: 2, seed: 3}
optim: {lr: 3.0e-3, warmup_steps: 2, eps: 1.0e-6}
train: {steps: 5, log_every: 1, eval_every: 0, eval_batches: 2, seed: 11, peak_gflops: 100, threads: 1, resume: none}
dist: {timeout_s: 60}
YAML
export OMP_NUM_THREADS=1
for global in 1 2 4 8; do  # one-process references: B=2, accum = accum x dp
  "$ANNEAL" train --config "$TMP/cfg.yaml" --set train.grad_accum=$global \
    --set train.checkpoint_dir="$TMP/ref$global" >"$TMP/ref$global.log" 2>&1 || bad "reference accum $global"
done
worst_l=0 worst_p=0 worst_l_name="" worst_p_name="" runs=0
for dp in 1 2; do for tp in 1 2; do for pp in 1 2; do
  zeros="0"
  [ $dp -eq 2 ] && zeros="0 1" && [ $pp -eq 1 ] && zeros="0 1 2"
  for zero in $zeros; do for accum in 1 4; do for rc in none full; do
    name="dp=$dp tp=$tp pp=$pp zero=$zero micro=$accum recompute=$rc"
    run="$TMP/g_${dp}${tp}${pp}_z${zero}_a${accum}_$rc"
    timeout 300 "$ANNEAL" launch --nproc-per-node $((dp * tp * pp)) -- "$ANNEAL" train --config "$TMP/cfg.yaml" \
      --set dist.tp=$tp --set dist.pp=$pp --set dist.zero=$zero --set train.grad_accum=$accum \
      --set train.recompute=$rc --set train.checkpoint_dir="$run" >"$run.log" 2>&1
    rc_=$?
    runs=$((runs + 1))
    golden_check "grid_${dp}${tp}${pp}_z${zero}_a${accum}_$rc" "$run.log"
    if [ $rc_ -ne 0 ]; then bad "$name: exit $rc_: $(grep -i error "$run.log" | head -3)"; continue; fi
    ref=$((dp * accum))
    if l=$($CMP losses "$TMP/ref$ref.log" "$run.log" 5 1e-5) && p=$($CMP params "$TMP/ref$ref/step-00000005" "$run/step-00000005"); then
      ok "$name: $l; $p"
      lv=$(sed -E 's/.*deviation over 5 steps: ([0-9.e+-]+).*/\1/' <<<"$l")
      pv=$(sed -E 's/.*worst deviation ([0-9.e+-]+) of.*/\1/' <<<"$p")
      if awk -v a="$lv" -v b="$worst_l" 'BEGIN{exit !(a>b)}'; then worst_l=$lv; worst_l_name=$name; fi
      if awk -v a="$pv" -v b="$worst_p" 'BEGIN{exit !(a>b)}'; then worst_p=$pv; worst_p_name=$name; fi
    else
      bad "$name: $l ${p:-}"
    fi
  done; done; done
done; done; done
echo "grid: $runs runs; worst loss deviation $worst_l ($worst_l_name); worst parameter deviation $worst_p of the tolerance ($worst_p_name)"
check "ZeRO-3 composes with tp (shards of each rank's slice) and full recomputation: dp=2 tp=2 micro=4" bash -c "
  timeout 300 '$ANNEAL' launch --nproc-per-node 4 -- '$ANNEAL' train --config '$TMP/cfg.yaml' --set dist.tp=2 --set dist.zero=3 \
    --set train.grad_accum=4 --set train.recompute=full --set train.checkpoint_dir='$TMP/z3tp' >'$TMP/z3tp.log' 2>&1 &&
  $CMP losses '$TMP/ref8.log' '$TMP/z3tp.log' 5 1e-5 && $CMP params '$TMP/ref8/step-00000005' '$TMP/z3tp/step-00000005'"
check "every rank of every grid run allocated exactly its memory formula ($(memory_formula_holds "$TMP"/g_*.log "$TMP/z3tp.log"))" \
  memory_formula_holds "$TMP"/g_*.log "$TMP/z3tp.log"
check "gpipe gives the same training as 1f1b" bash -c "
  timeout 300 '$ANNEAL' launch --nproc-per-node 2 -- '$ANNEAL' train --config '$TMP/cfg.yaml' --set dist.pp=2 \
    --set dist.schedule=gpipe --set train.grad_accum=4 --set train.checkpoint_dir='$TMP/gpipe' >'$TMP/gpipe.log' 2>&1 &&
  $CMP losses '$TMP/ref4.log' '$TMP/gpipe.log' 5 1e-5 && $CMP params '$TMP/ref4/step-00000005' '$TMP/gpipe/step-00000005'"
check "selective recomputation composes with tp x pp" bash -c "
  timeout 300 '$ANNEAL' launch --nproc-per-node 4 -- '$ANNEAL' train --config '$TMP/cfg.yaml' --set dist.tp=2 --set dist.pp=2 \
    --set train.recompute=selective --set train.grad_accum=4 --set train.checkpoint_dir='$TMP/sel' >'$TMP/sel.log' 2>&1 &&
  $CMP losses '$TMP/ref4.log' '$TMP/sel.log' 5 1e-5 && $CMP params '$TMP/ref4/step-00000005' '$TMP/sel/step-00000005'"
check "sequence parallelism composes with dp x tp x pp, ZeRO-1 and 4 micro-batches" bash -c "
  timeout 300 '$ANNEAL' launch --nproc-per-node 8 -- '$ANNEAL' train --config '$TMP/cfg.yaml' --set dist.tp=2 --set dist.pp=2 \
    --set dist.zero=1 --set dist.sequence_parallel=true --set train.grad_accum=4 --set train.checkpoint_dir='$TMP/sp8' >'$TMP/sp8.log' 2>&1 &&
  $CMP losses '$TMP/ref8.log' '$TMP/sp8.log' 5 1e-5 && $CMP params '$TMP/ref8/step-00000005' '$TMP/sp8/step-00000005'"
check "sequence parallelism with full recomputation (tp=2)" bash -c "
  timeout 300 '$ANNEAL' launch --nproc-per-node 2 -- '$ANNEAL' train --config '$TMP/cfg.yaml' --set dist.tp=2 \
    --set dist.sequence_parallel=true --set train.recompute=full --set train.checkpoint_dir='$TMP/sp2' >'$TMP/sp2.log' 2>&1 &&
  $CMP losses '$TMP/ref1.log' '$TMP/sp2.log' 5 1e-5 && $CMP params '$TMP/ref1/step-00000005' '$TMP/sp2/step-00000005'"
for g in gpipe sel sp8 sp2; do golden_check "grid_$g" "$TMP/$g.log"; done
# Stage 0 of (2,2,2) holds no logits: there the residual stream's rows dominate, and sp keeps half.
check "sequence parallelism keeps fewer activations on a stage than plain tp=2" bash -c "
  a=\$(sed -n 's/.*memory of rank 0 .*activations \([0-9.]*\) MB allocated.*/\1/p' '$TMP/sp8.log')
  b=\$(sed -n 's/.*memory of rank 0 .*activations \([0-9.]*\) MB allocated.*/\1/p' '$TMP/g_222_z1_a4_none.log')
  echo \"stage 0 activations: \$a MB with sequence parallelism, \$b MB without\"
  awk -v a=\"\$a\" -v b=\"\$b\" 'BEGIN{exit !(a > 0 && a < b)}'"
for f in "$TMP"/g_222_z1_a4_full.log "$TMP"/g_121_z0_a1_none.log "$TMP"/sel.log "$TMP"/sp8.log; do
  check "$(basename "$f" .log): activation memory allocated equals its formula" \
    bash -c "grep 'activation memory' '$f' | grep -qE '([0-9.]+) MB allocated, formula \1 MB'"
done
check "the tp=2 checkpoint splits attn.proj.weight by columns into two boxes" bash -c \
  "grep -q 'model-pp00-tp01.safetensors' '$TMP/g_121_z0_a1_none/step-00000005/manifest.json'"

# Resharding: 4 steps at (dp, tp, pp) = (2, 2, 1) with ZeRO-1 (B=2: a global batch of 4), then step 5
# at (2, 2, 1) itself, (1, 2, 2), (1, 1, 1) and (1, 4, 1) with B=4.
timeout 300 "$ANNEAL" launch --nproc-per-node 4 -- "$ANNEAL" train --config "$TMP/cfg.yaml" --set dist.tp=2 --set dist.zero=1 \
  --set train.steps=4 --set train.resume=auto --set train.checkpoint_dir="$TMP/rs" >"$TMP/rs.log" 2>&1 || bad "reshard: first part"
check "reshard: the (2,2,1) checkpoint holds optimizer slices as ranges of boxes" \
  bash -c "grep -q '\"range\"' '$TMP/rs/step-00000004/manifest.json' && grep -q '\"tp\": 2' '$TMP/rs/step-00000004/manifest.json'"
for layout in "2 2 1 1 2" "1 2 2 0 4" "1 1 1 0 4" "1 4 1 0 4"; do
  set -- $layout
  d="$TMP/rs_$1$2$3"
  cp -r "$TMP/rs" "$d"
  timeout 300 "$ANNEAL" launch --nproc-per-node $(($1 * $2 * $3)) -- "$ANNEAL" train --config "$TMP/cfg.yaml" --set dist.tp=$2 \
    --set dist.pp=$3 --set dist.zero=$4 --set data.batch_size=$5 --set train.resume=auto --set train.checkpoint_dir="$d" \
    >"$d.log" 2>&1 || bad "reshard: resume at (dp,tp,pp) = ($1,$2,$3): $(grep -i error "$d.log" | head -2)"
done
for layout in 122 111 141; do
  check "reshard: resumed at (dp,tp,pp) = (${layout:0:1},${layout:1:1},${layout:2:1}): step 5's loss equals the (2,2,1) continuation's" \
    $CMP losses "$TMP/rs_221.log" "$TMP/rs_$layout.log" 1 1e-6
  check "reshard: ($layout) said it resumed from step 4" grep -q "resumed from .*step-00000004" "$TMP/rs_$layout.log"
done

# Combinations that make no sense, refused before anything is allocated.
expect_exit "ZeRO-2 with pipeline parallelism is refused" 2 "dist.zero = 2 with dist.pp = 2: ZeRO-2" \
  "$ANNEAL" launch --nproc-per-node 4 -- "$ANNEAL" train --config "$TMP/cfg.yaml" --set dist.pp=2 --set dist.zero=2
expect_exit "tp must divide the heads" 2 "dist.tp = 3 does not divide model.n_head = 4" \
  "$ANNEAL" launch --nproc-per-node 3 -- "$ANNEAL" train --config "$TMP/cfg.yaml" --set dist.tp=3
expect_exit "pp at most the layers" 2 "dist.pp = 3 is more than model.n_layer = 2" \
  "$ANNEAL" launch --nproc-per-node 3 -- "$ANNEAL" train --config "$TMP/cfg.yaml" --set dist.pp=3
expect_exit "sequence parallelism needs B x T divisible by tp" 2 "choose data.batch_size x data.seq_len divisible by dist.tp" \
  "$ANNEAL" launch --nproc-per-node 2 -- "$ANNEAL" train --config "$TMP/cfg.yaml" --set dist.tp=2 \
  --set dist.sequence_parallel=true --set data.batch_size=1 --set data.seq_len=31
expect_exit "an unknown schedule" 2 "dist.schedule = 'zigzag' must be 1f1b or gpipe" \
  "$ANNEAL" train --config "$TMP/cfg.yaml" --set dist.schedule=zigzag
finish
