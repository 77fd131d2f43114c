/* The peer: Open MPI's MPI_Allreduce (fp32 sum, in place), same sizes and iteration counts as
 * allreduce_anneal.cc (best of 3 timed repetitions), one line per size on rank 0:
 * SIZE_BYTES SECONDS_PER_OP BUS_GB_S
 * allreduce_mpi [MAX_BYTES [REPS [MAX_ITERS]]]: as allreduce_anneal (defaults 268435456, 3, 1000). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  size_t max_bytes = argc > 1 ? strtoull(argv[1], NULL, 10) : ((size_t)256 << 20);
  int reps = argc > 2 ? atoi(argv[2]) : 3, max_iters = argc > 3 ? atoi(argv[3]) : 1000;
  if (reps < 1) reps = 1;
  if (max_iters < 1) max_iters = 1;
  for (size_t bytes = 1024; bytes <= max_bytes; bytes *= 4) {
    size_t count = bytes / 4;
    float* x = malloc(bytes);
    for (size_t i = 0; i < count; ++i) x[i] = 1.0f;
    size_t it = ((size_t)512 << 20) / bytes;
    int iters = it < 3 ? 3 : it > 1000 ? 1000 : (int)it;
    if (iters > max_iters) iters = max_iters;
    MPI_Allreduce(MPI_IN_PLACE, x, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double s = 1e30;
    for (int rep = 0; rep < reps; ++rep) { /* best of 3 (reps) timed repetitions, as for anneal */
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      for (int i = 0; i < iters; ++i) MPI_Allreduce(MPI_IN_PLACE, x, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      double t = (MPI_Wtime() - t0) / iters;
      if (t < s) s = t;
    }
    if (rank == 0) printf("%zu %.9f %.4f\n", bytes, s, bytes / s * 2.0 * (n - 1) / n / 1e9);
    fflush(stdout);
    free(x);
  }
  MPI_Finalize();
  return 0;
}
