// The CPU's fp32 GEMM ceiling as OpenBLAS reaches it, at the OpenMP thread count in effect
// (OMP_NUM_THREADS): GFLOP/s of cblas_sgemm, warm (one untimed call per shape first), the best of
// REPS timed calls, on the shapes given — the ones the measured model runs (bench/train_cpu_vs_torch
// passes its LM head's and its layers' products in the three layouts of forward, input gradient and
// weight gradient) — and on square 1024 and 2048. The ceiling is the best over all of them.
//   sgemm_peak [--reps N] [MxNxK:LAYOUT ...]     LAYOUT: nn, nt (B transposed), tn (A transposed)
// Prints one "shape" line per product and `RESULT sgemm_gflops=... threads=... best_shape=...`.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Shape {
  long m, n, k;
  bool ta, tb;
  std::string text;
};

bool Parse(const char* s, Shape* out) {
  char layout[3] = {0};
  if (std::sscanf(s, "%ldx%ldx%ld:%2s", &out->m, &out->n, &out->k, layout) != 4) return false;
  if (out->m <= 0 || out->n <= 0 || out->k <= 0) return false;
  const std::string l(layout);
  if (l != "nn" && l != "nt" && l != "tn") return false;
  out->ta = l == "tn";
  out->tb = l == "nt";
  out->text = s;
  return true;
}

double Gflops(const Shape& s, int reps) {
  std::vector<float> a(static_cast<size_t>(s.m) * s.k, 0.5f), b(static_cast<size_t>(s.k) * s.n, 0.25f),
      c(static_cast<size_t>(s.m) * s.n, 0.0f);
  const long lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
  auto call = [&] {
    cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans, s.tb ? CblasTrans : CblasNoTrans, s.m, s.n, s.k, 1.0f,
                a.data(), lda, b.data(), ldb, 0.0f, c.data(), s.n);
  };
  call();  // warm: pages touched, threads started, kernels chosen
  double best = 0;
  for (int rep = 0; rep < reps; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * s.m * s.n * s.k / sec / 1e9);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 5;
  std::vector<Shape> shapes;
  for (const char* sq : {"1024x1024x1024:nn", "2048x2048x2048:nn"}) {
    Shape s;
    Parse(sq, &s);
    shapes.push_back(s);
  }
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
      continue;
    }
    Shape s;
    if (!Parse(argv[i], &s)) {
      std::fprintf(stderr, "sgemm_peak: '%s' is no MxNxK:LAYOUT (LAYOUT nn, nt or tn), e.g. 2048x50257x256:nt\n", argv[i]);
      return 2;
    }
    shapes.push_back(s);
  }
  double best = 0;
  std::string best_shape;
  for (const Shape& s : shapes) {
    const double g = Gflops(s, reps);
    std::printf("shape %-22s %8.1f GFLOP/s (best of %d, warm)\n", s.text.c_str(), g, reps);
    if (g > best) best = g, best_shape = s.text;
  }
  std::printf("RESULT sgemm_gflops=%.1f threads=%d best_shape=%s reps=%d\n", best, omp_get_max_threads(), best_shape.c_str(), reps);
  return 0;
}
