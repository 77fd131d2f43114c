#!/bin/bash
# Fault runs (peers tier: real processes, real TCP, real signals, real network namespaces).
#  1. A rank killed (SIGKILL) mid-run: the survivor fails within timeout + 10 s naming rank 1, exit 3.
#  2. A rank frozen (SIGSTOP) mid-run: the same, after the collective timeout.
#  3. SIGKILL with --max-restarts 1: the group restarts, resumes from the newest complete checkpoint
#     and ends with the same final loss (bit for bit) as an uninterrupted run.
#  1-3 at ZeRO-3 too: a rank killed while its peer gathers parameters (most of a ZeRO-3 step's
#     collectives are the layers' all-gathers) fails the peer the same way, and a restart ends with the
#     uninterrupted ZeRO-3 run's final loss and state hash.
#  4. Two "hosts" in their own network namespaces (veth pair, 10.77.0.1 / 10.77.0.2), one launcher in
#     each: the same losses as one process; then the link is cut mid-run and both sides fail within
#     timeout + 10 s naming the lost peer.
source "$(dirname "$0")/../e2e/lib.sh"
"$ANNEAL" prep --input data/kjv --output "$TMP/ds" --val-fraction 0.05 --unit-mb 1 --quiet >/dev/null
TIMEOUT=5
cat >"$TMP/cfg.yaml" <<YAML
model: {vocab_size: 50257, max_seq_len: 32, n_layer: 2, n_head: 2, n_embd: 32}
data: {dir: $TMP/ds, seq_len: 32, batch_size: 2, seed: 3}
optim: {lr: 3.0e-3, warmup_steps: 2, eps: 1.0e-6}
train: {steps: 400, log_every: 1, eval_every: 0, eval_batches: 2, checkpoint_every: 25, seed: 11, peak_gflops: 100, threads: 1}
dist: {timeout_s: $TIMEOUT}
YAML
export OMP_NUM_THREADS=1

# pid of the rank with RANK=$1 among the anneal train processes
rank_pid() {
  for p in $(pgrep -f "anneal train --config $TMP/cfg.yaml"); do
    if tr '\0' '\n' </proc/$p/environ 2>/dev/null | grep -qx "RANK=$1"; then echo $p; return; fi
  done
}
# wait until file $1 contains pattern $2 (at most $3 s)
wait_for() { for _ in $(seq 1 $(($3 * 10))); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done; return 1; }

fault_run() {  # fault_run NAME SIGNAL [--set ...]
  local name=$1 sig=$2 log="$TMP/$1.log"
  shift 2
  "$ANNEAL" launch --nproc-per-node 2 --grace-s 30 -- "$ANNEAL" train --config "$TMP/cfg.yaml" \
    --set train.checkpoint_dir="$TMP/$name" --set train.steps=100000 "$@" >"$log" 2>&1 &
  local launcher=$!
  wait_for "$log" "step    30/" 60 || { bad "$name: the run did not reach step 30"; kill $launcher; return; }
  local victim=$(rank_pid 1) t0=$(date +%s.%N)
  kill -$sig "$victim"
  wait_for "$log" "\[rank 0\].*error" $((TIMEOUT + 30))
  local t1=$(date +%s.%N)
  wait $launcher
  local rc=$?
  local line=$(grep "\[rank 0\].*error" "$log" | head -1)
  local took=$(echo "$t1 - $t0" | bc)
  echo "$name: rank 0 reported after $took s: ${line:0:400}"
  if [ $rc -eq 3 ] && echo "$line" | grep -q "lost rank 1" && [ "$(echo "$took < $TIMEOUT + 10" | bc)" = 1 ]; then
    ok "$name: survivor failed in $took s (timeout $TIMEOUT s + 10) naming rank 1, launcher exit 3"
  else
    bad "$name: exit $rc after $took s; $(tail -5 "$log")"
  fi
  check "$name: the launcher's status names the first failure" grep -q "failed first" "$log"
  kill -9 $(pgrep -f "anneal train --config $TMP/cfg.yaml") 2>/dev/null
}
fault_run killed KILL
fault_run frozen STOP
fault_run killed_zero3 KILL --set dist.zero=3
echo "killed_zero3: the survivor was waiting in: $(grep -oE '(all-gather|reduce-scatter|allreduce)[^;:]*' "$TMP/killed_zero3.log" | head -1)"

# 3. restart after SIGKILL, same final loss as the uninterrupted run
"$ANNEAL" launch --nproc-per-node 2 -- "$ANNEAL" train --config "$TMP/cfg.yaml" --set train.steps=120 \
  --set train.checkpoint_dir="$TMP/clean" >"$TMP/clean.log" 2>&1 || bad "uninterrupted run"
"$ANNEAL" launch --nproc-per-node 2 --max-restarts 1 --grace-s 30 -- "$ANNEAL" train --config "$TMP/cfg.yaml" \
  --set train.steps=120 --set train.checkpoint_dir="$TMP/restart" >"$TMP/restart.log" 2>&1 &
launcher=$!
wait_for "$TMP/restart.log" "step    60/" 60 && kill -KILL "$(rank_pid 1)"
wait $launcher
rc=$?
final() { grep "step   120/120" "$1" | sed 's/.*loss \S* (\(\S*\)).*/\1/'; }
check "restart: the launcher exits 0 after one restart" test $rc -eq 0
check "restart: the second attempt resumed from a checkpoint" grep -q "resumed from .*step-000000[0-9][0-9]" "$TMP/restart.log"
check "restart: same final loss as the uninterrupted run ($(final "$TMP/clean.log") vs $(final "$TMP/restart.log"))" \
  test -n "$(final "$TMP/clean.log")" -a "$(final "$TMP/clean.log")" = "$(final "$TMP/restart.log")"

# 3 at ZeRO-3: the parameters sharded too; the restart resumes them from the checkpoint's whole vector.
hash_of() { sed -nE 's/.*state hash.*: ([0-9a-f]+)$/\1/p' "$1"; }
"$ANNEAL" launch --nproc-per-node 2 -- "$ANNEAL" train --config "$TMP/cfg.yaml" --set train.steps=120 --set dist.zero=3 \
  --set train.checkpoint_dir="$TMP/clean3" >"$TMP/clean3.log" 2>&1 || bad "uninterrupted ZeRO-3 run"
"$ANNEAL" launch --nproc-per-node 2 --max-restarts 1 --grace-s 30 -- "$ANNEAL" train --config "$TMP/cfg.yaml" \
  --set train.steps=120 --set dist.zero=3 --set train.checkpoint_dir="$TMP/restart3" >"$TMP/restart3.log" 2>&1 &
launcher=$!
wait_for "$TMP/restart3.log" "step    60/" 60 && kill -KILL "$(rank_pid 1)"
wait $launcher
rc=$?
check "ZeRO-3 restart: the launcher exits 0 after one restart, resumed from a checkpoint" \
  bash -c "test $rc -eq 0 && grep -q 'resumed from .*step-000000[0-9][0-9]' '$TMP/restart3.log'"
check "ZeRO-3 restart: the uninterrupted run's final loss ($(final "$TMP/clean3.log")) and state hash ($(hash_of "$TMP/clean3.log"))" \
  test -n "$(final "$TMP/clean3.log")" -a "$(final "$TMP/clean3.log")" = "$(final "$TMP/restart3.log")" -a \
  -n "$(hash_of "$TMP/clean3.log")" -a "$(hash_of "$TMP/clean3.log")" = "$(hash_of "$TMP/restart3.log")"

# 4. two hosts in network namespaces
NS0=anneal_h0_$$ NS1=anneal_h1_$$
cleanup_ns() { ip netns del $NS0 2>/dev/null; ip netns del $NS1 2>/dev/null; }
trap 'cleanup_ns; rm -rf "$TMP"' EXIT
if ! ip netns add $NS0 2>/dev/null; then
  bad "network namespaces: 'ip netns add' failed (needs root and CAP_SYS_ADMIN)"
  finish; exit
fi
ip netns add $NS1
ip link add veth_a$$ netns $NS0 type veth peer name veth_b$$ netns $NS1
ip -n $NS0 addr add 10.77.0.1/24 dev veth_a$$ && ip -n $NS0 link set veth_a$$ up && ip -n $NS0 link set lo up
ip -n $NS1 addr add 10.77.0.2/24 dev veth_b$$ && ip -n $NS1 link set veth_b$$ up && ip -n $NS1 link set lo up
host_run() {  # host_run NODE LOG ARGS...: one launcher with 1 rank on host NODE
  local node=$1 log=$2; shift 2
  local ns=$([ $node = 0 ] && echo $NS0 || echo $NS1)
  ip netns exec $ns "$ANNEAL" launch --nnodes 2 --node-rank $node --nproc-per-node 1 --master-addr 10.77.0.1 \
    --master-port 29400 --grace-s 30 -- "$ANNEAL" train --config "$TMP/cfg.yaml" "$@" >"$log" 2>&1
}
"$ANNEAL" train --config "$TMP/cfg.yaml" --set train.steps=8 --set train.grad_accum=2 --set train.checkpoint_dir= >"$TMP/one.log" 2>&1
host_run 0 "$TMP/h0.log" --set train.steps=8 --set train.checkpoint_dir="$TMP/mh" & p0=$!
host_run 1 "$TMP/h1.log" --set train.steps=8 --set train.checkpoint_dir="$TMP/mh" & p1=$!
wait $p0; r0=$?; wait $p1; r1=$?
check "two hosts: both launchers exit 0" test $r0 -eq 0 -a $r1 -eq 0
check "two hosts: rank 1 ran on 10.77.0.2 (nothing assumes localhost)" grep -q "node 1 (10.77.0.2); store 10.77.0.1:29401" "$TMP/h1.log"
check "two hosts: losses equal one process on the same global batch" \
  /usr/bin/python3 "$(dirname "$0")/../e2e/dist_compare.py" losses "$TMP/one.log" "$TMP/h0.log" 8 1e-5
host_run 0 "$TMP/c0.log" --set train.steps=100000 --set train.checkpoint_dir= & p0=$!
host_run 1 "$TMP/c1.log" --set train.steps=100000 --set train.checkpoint_dir= & p1=$!
wait_for "$TMP/c0.log" "step    30/" 60
t0=$(date +%s.%N)
ip -n $NS0 link set veth_a$$ down  # cut the link
wait_for "$TMP/c0.log" "\[rank 0\].*error" $((TIMEOUT + 30)); t_0=$(date +%s.%N)
wait_for "$TMP/c1.log" "\[rank 1\].*error" $((TIMEOUT + 30)); t_1=$(date +%s.%N)
wait $p0; r0=$?
wait $p1; r1=$?
d0=$(echo "$t_0 - $t0" | bc); d1=$(echo "$t_1 - $t0" | bc)
e0=$(grep "\[rank 0\].*error" "$TMP/c0.log" | head -1); e1=$(grep "\[rank 1\].*error" "$TMP/c1.log" | head -1)
echo "cut: host 0 (rank 0) failed in $d0 s: ${e0:0:400}"
echo "cut: host 1 (rank 1) failed in $d1 s: ${e1:0:400}"
# Timed by each rank's error line (the launchers exit afterwards): both within timeout + 10 s of the cut.
check "cut: host 0's rank names the lost rank 1 on 10.77.0.2" bash -c "echo '$e0' | grep -q 'rank 1 on 10.77.0.2'"
check "cut: host 1's rank names what it lost (rank 0 / the store on 10.77.0.1)" bash -c "echo '$e1' | grep -qE 'rank 0|10.77.0.1'"
check "cut: both launchers exit 3 (r0=$r0 r1=$r1)" test $r0 -eq 3 -a $r1 -eq 3
check "cut: both sides failed within timeout + 10 s ($d0 s, $d1 s)" \
  test "$(echo "$d0 < $TIMEOUT + 10 && $d1 < $TIMEOUT + 10" | bc)" = 1
cleanup_ns
finish
