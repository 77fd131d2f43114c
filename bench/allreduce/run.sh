#!/bin/bash
# Allreduce bus bandwidth: anneal's Communicator (ranks started by `anneal launch`; both on this host,
# so it goes through ShmGroup's shared memory) against Open MPI's MPI_Allreduce (mpirun), 2 processes
# on this machine, fp32 sum, 1 KB .. 256 MB, best of 3 timed repetitions per size on each side, all in
# this one invocation. MPI runs twice: as installed, and with glibc's malloc keeping freed memory
# (MALLOC_MMAP_MAX_=0, MALLOC_TRIM_THRESHOLD_ huge: its large-message path allocates a message-sized
# temporary every call, and this VM's first-touch page faults are slow); the ratio is against the
# stronger of the two at each size — and with its single-copy mechanism and each allreduce algorithm
# of coll_tuned forced (below): the peer at each size is the strongest of all. Bus bandwidth = bytes / time x 2(n-1)/n (NCCL's convention).
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
MPI=(mpirun --allow-run-as-root --oversubscribe -np "$NP")
KEEP=(-x MALLOC_MMAP_MAX_=0 -x MALLOC_TRIM_THRESHOLD_=4294967296)
"${MPI[@]}" "$BUILD/bench/allreduce_mpi" "${ARGS[@]}" >"$m"
"${MPI[@]}" "${KEEP[@]}" "$BUILD/bench/allreduce_mpi" "${ARGS[@]}" >"$k"
# Open MPI's other configurations (with the kept memory, the stronger of the two above): the shared-
# memory transport's single-copy mechanism (vader's cma, the default, against none: copy in and out
# through the shared segment) and each of coll_tuned's allreduce algorithms forced (its default picks
# one by size). Each size's strongest of every configuration is the peer; the table names which.
TUNED=("single_copy=none|--mca btl_vader_single_copy_mechanism none")
for alg in 1:basic_linear 2:nonoverlapping 3:recursive_doubling 4:ring 5:segmented_ring 6:rabenseifner; do
  TUNED+=("algorithm=${alg#*:}|--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm ${alg%%:*}")
done
t=$(mktemp -d)
trap 'rm -rf "$a" "$m" "$k" "$t" "$t.err"' EXIT
cp "$k" "$t/0.kept"
names=("as installed" "kept memory")
i=0
for c in "${TUNED[@]}"; do
  i=$((i + 1)) name=${c%%|*}
  read -ra mca <<<"${c#*|}"
  if "${MPI[@]}" "${KEEP[@]}" "${mca[@]}" "$BUILD/bench/allreduce_mpi" "${ARGS[@]}" >"$t/$i.$name" 2>"$t.err"; then
    names+=("$name")
  else
    echo "allreduce: Open MPI with $name failed (left out): $(tail -2 "$t.err" | tr '\n' ' ')"; rm -f "$t/$i.$name"
  fi
done
echo "Open MPI configurations (each size's strongest is the peer): ${names[*]}; kept memory = ${KEEP[*]}"
# best_mpi BYTES -> "GBS NAME" over the kept-memory and tuned runs (and the as-installed one)
best_mpi() {
  { awk -v b="$1" '$1 == b { print $3, "as-installed" }' "$m"
    for f in "$t"/*; do awk -v b="$1" -v n="${f##*/}" '$1 == b { sub(/^[0-9]+\./, "", n); print $3, n }' "$f"; done
  } | sort -g -k1,1 | tail -1
}
printf "%12s %12s %12s %12s %14s %14s  %-28s %8s\n" bytes "anneal us" "anneal GB/s" "MPI GB/s" "MPI kept GB/s" "MPI best GB/s" "MPI best configuration" ratio
paste "$a" "$m" "$k" | while read -r b1 s1 g1 _ _ g2 _ _ g3; do
  read -r best which <<<"$(best_mpi "$b1")"
  printf "%12s %12.1f %12.3f %12.3f %14.3f %14.3f  %-28s %8.2f\n" "$b1" "$(echo "$s1*1000000" | bc -l)" "$g1" "$g2" "$g3" \
    "$best" "$which" "$(echo "$g1/$best" | bc -l)"
  echo "RESULT allreduce np=$NP bytes=$b1 anneal_busbw_GBs=$g1 mpi_busbw_GBs=$g2 mpi_kept_busbw_GBs=$g3 mpi_best_busbw_GBs=$best mpi_best_config=$which ratio=$(printf %.2f "$(echo "$g1/$best" | bc -l)")" >&2
done
