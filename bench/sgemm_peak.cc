// The CPU's fp32 GEMM ceiling as OpenBLAS reaches it: GFLOP/s of cblas_sgemm on square matrices at
// the OpenMP thread count in effect (OMP_NUM_THREADS). Prints `RESULT sgemm_gflops=...`.
#include <cblas.h>
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <vector>

int main() {
  const int n = 1024;
  std::vector<float> a(static_cast<size_t>(n) * n, 0.5f), b(a.size(), 0.25f), c(a.size(), 0.0f);
  double best = 0;
  for (int rep = 0; rep < 8; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rep > 0) best = std::max(best, 2.0 * n * n * n / s / 1e9);
  }
  std::printf("RESULT sgemm_gflops=%.1f threads=%d n=%d\n", best, omp_get_max_threads(), n);
  return 0;
}
