#!/bin/bash
# Allreduce bus bandwidth: anneal (Communicator over Gloo TCP, launched by `anneal launch`) against
# Open MPI's MPI_Allreduce (mpirun), 2 processes on this machine, fp32 sum, 1 KB .. 256 MB, run one
# after the other in this one invocation. Bus bandwidth = bytes / time x 2(n-1)/n (NCCL's convention).
# Prints a side-by-side table and RESULT lines; ratio = anneal / MPI (higher is better for anneal).
set -euo pipefail
BUILD=${1:-build/release}
NP=${NP:-2}
ANNEAL=$BUILD/src/anneal
export OMP_NUM_THREADS=1
a=$(mktemp) m=$(mktemp)
trap 'rm -f "$a" "$m"' EXIT
"$ANNEAL" launch --nproc-per-node "$NP" -- "$BUILD/bench/allreduce_anneal" 2>/dev/null | sed 's/^\[rank 0\] //' >"$a"
mpirun --allow-run-as-root --oversubscribe -np "$NP" "$BUILD/bench/allreduce_mpi" >"$m"
printf "%12s %14s %14s %14s %14s %8s\n" bytes "anneal us" "anneal GB/s" "MPI us" "MPI GB/s" ratio
paste "$a" "$m" | while read -r b1 s1 g1 b2 s2 g2; do
  printf "%12s %14.1f %14.3f %14.1f %14.3f %8.2f\n" "$b1" "$(echo "$s1*1000000" | bc -l)" "$g1" \
    "$(echo "$s2*1000000" | bc -l)" "$g2" "$(echo "$g1/$g2" | bc -l)"
  echo "RESULT allreduce np=$NP bytes=$b1 anneal_busbw_GBs=$g1 mpi_busbw_GBs=$g2 ratio=$(printf %.2f "$(echo "$g1/$g2" | bc -l)")" >&2
done
