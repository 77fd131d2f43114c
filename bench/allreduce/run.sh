#!/bin/bash
# Allreduce bus bandwidth: anneal's Communicator (ranks started by `anneal launch`; both on this host,
# so it goes through ShmGroup's shared memory) against Open MPI's MPI_Allreduce (mpirun), 2 processes
# on this machine, fp32 sum, 1 KB .. 256 MB, best of 3 timed repetitions per size on each side, all in
# this one invocation. MPI runs twice: as installed, and with glibc's malloc keeping freed memory
# (MALLOC_MMAP_MAX_=0, MALLOC_TRIM_THRESHOLD_ huge: its large-message path allocates a message-sized
# temporary every call, and this VM's first-touch page faults are slow); the ratio is against the
# stronger of the two at each size. Bus bandwidth = bytes / time x 2(n-1)/n (NCCL's convention).
# Prints a side-by-side table and RESULT lines; ratio = anneal / best MPI (higher is better for anneal).
# BENCH_SMOKE=1: the same, 1 KB .. 1 MB, 1 timed repetition of at most 3 operations per size (a check
# that the script still runs; the figures mean nothing).
set -euo pipefail
BUILD=${1:-build/release}
NP=${NP:-2}
ANNEAL=$BUILD/src/anneal
ARGS=()  # both binaries' defaults: 1 KB .. 256 MB, best of 3, up to 1000 operations per repetition
if [ "${BENCH_SMOKE:-0}" = 1 ]; then ARGS=(1048576 1 3); fi  # MAX_BYTES REPS MAX_ITERS
export OMP_NUM_THREADS=1
a=$(mktemp) m=$(mktemp) k=$(mktemp)
trap 'rm -f "$a" "$m" "$k"' EXIT
"$ANNEAL" launch --nproc-per-node "$NP" -- "$BUILD/bench/allreduce_anneal" "${ARGS[@]}" 2>/dev/null | sed 's/^\[rank 0\] //' >"$a"
mpirun --allow-run-as-root --oversubscribe -np "$NP" "$BUILD/bench/allreduce_mpi" "${ARGS[@]}" >"$m"
mpirun --allow-run-as-root --oversubscribe -np "$NP" -x MALLOC_MMAP_MAX_=0 -x MALLOC_TRIM_THRESHOLD_=4294967296 \
  "$BUILD/bench/allreduce_mpi" "${ARGS[@]}" >"$k"
printf "%12s %12s %12s %12s %14s %8s\n" bytes "anneal us" "anneal GB/s" "MPI GB/s" "MPI kept GB/s" ratio
paste "$a" "$m" "$k" | while read -r b1 s1 g1 _ _ g2 _ _ g3; do
  best=$(echo "if ($g2 > $g3) $g2 else $g3" | bc -l)
  printf "%12s %12.1f %12.3f %12.3f %14.3f %8.2f\n" "$b1" "$(echo "$s1*1000000" | bc -l)" "$g1" "$g2" "$g3" \
    "$(echo "$g1/$best" | bc -l)"
  echo "RESULT allreduce np=$NP bytes=$b1 anneal_busbw_GBs=$g1 mpi_busbw_GBs=$g2 mpi_kept_busbw_GBs=$g3 ratio=$(printf %.2f "$(echo "$g1/$best" | bc -l)")" >&2
done
