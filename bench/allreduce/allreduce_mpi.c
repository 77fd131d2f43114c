/* The peer: Open MPI's MPI_Allreduce (fp32 sum, in place), same sizes and iteration counts as
 * allreduce_anneal.cc (best of 3 timed repetitions), one line per size on rank 0:
 * SIZE_BYTES SECONDS_PER_OP BUS_GB_S */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  for (size_t bytes = 1024; bytes <= (256u << 20); bytes *= 4) {
    size_t count = bytes / 4;
    float* x = malloc(bytes);
    for (size_t i = 0; i < count; ++i) x[i] = 1.0f;
    size_t it = ((size_t)512 << 20) / bytes;
    int iters = it < 3 ? 3 : it > 1000 ? 1000 : (int)it;
    MPI_Allreduce(MPI_IN_PLACE, x, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double s = 1e30;
    for (int rep = 0; rep < 3; ++rep) { /* best of 3 timed repetitions, as for anneal */
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
