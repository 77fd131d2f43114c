// The row-major GEMMs as cuBLASLt's column-major arguments (kernels/cuda/gemm_args.h), run through a
// plain column-major GEMM on the host and held to the row-major reference matmul (kernels/ref).
#include "kernels/cuda/gemm_args.h"

#include <gtest/gtest.h>

#include "testing/numeric.h"

#include <cmath>
#include <random>
#include <vector>

#include "kernels/ops.h"

namespace anneal {
namespace {

using testing::NormErr;
std::vector<float> Random(size_t n, uint64_t seed, float scale = 1.0f) { return testing::RandomNormal(n, seed, scale); }

using namespace cudagemm;

// C = alpha * op(A) * op(B) + beta * C, column-major, as cuBLAS defines it.
void HostGemm(const GemmArgs& g, const float* A, const float* B, float* C) {
  for (int64_t j = 0; j < g.n; ++j) {
    for (int64_t i = 0; i < g.m; ++i) {
      double s = 0;
      for (int64_t p = 0; p < g.k; ++p) {
        const float a = g.transa ? A[p + i * g.lda] : A[i + p * g.lda];
        const float b = g.transb ? B[j + p * g.ldb] : B[p + j * g.ldb];
        s += static_cast<double>(a) * b;
      }
      C[i + j * g.ldc] = static_cast<float>(g.alpha * s + g.beta * C[i + j * g.ldc]);
    }
  }
}

double MaxRel(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]) / (1e-3 + std::fabs(b[i])));
  return m;
}

TEST(CudaGemmArgsTest, ForwardAndBothGradientsMatchTheRowMajorReference) {
  for (auto [N, C, OC] : {std::tuple<int, int, int>{3, 5, 7}, {17, 32, 9}, {64, 48, 144}}) {
    const std::vector<float> inp = Random(static_cast<size_t>(N) * C, 1), w = Random(static_cast<size_t>(OC) * C, 2),
                             dout = Random(static_cast<size_t>(N) * OC, 3);
    std::vector<float> out_ref(static_cast<size_t>(N) * OC), out(out_ref.size());
    RefKernels().linear_forward(out_ref.data(), inp.data(), w.data(), nullptr, N, C, OC);
    const GemmArgs f = ForwardArgs(N, C, OC, false, false);
    EXPECT_TRUE(f.transa && !f.transb);
    HostGemm(f, w.data(), inp.data(), out.data());
    EXPECT_LT(MaxRel(out, out_ref), 1e-5) << N << " " << C << " " << OC;

    // Gradients accumulate (beta = 1) into what is there.
    std::vector<float> dinp_ref = Random(static_cast<size_t>(N) * C, 4), dw_ref = Random(static_cast<size_t>(OC) * C, 5);
    std::vector<float> dinp = dinp_ref, dw = dw_ref, dbias(OC, 0.0f);
    RefKernels().linear_backward(dinp_ref.data(), dw_ref.data(), dbias.data(), dout.data(), inp.data(), w.data(), N, C,
                                 OC);
    HostGemm(InputGradArgs(N, C, OC), w.data(), dout.data(), dinp.data());
    HostGemm(WeightGradArgs(N, C, OC), inp.data(), dout.data(), dw.data());
    EXPECT_LT(MaxRel(dinp, dinp_ref), 1e-5);
    EXPECT_LT(MaxRel(dw, dw_ref), 1e-5);
  }
}

TEST(CudaGemmArgsTest, EpiloguesFollowBiasAndGelu) {
  EXPECT_EQ(ForwardArgs(2, 3, 4, false, false).epilogue, Epilogue::kNone);
  EXPECT_EQ(ForwardArgs(2, 3, 4, true, false).epilogue, Epilogue::kBias);
  EXPECT_EQ(ForwardArgs(2, 3, 4, true, true).epilogue, Epilogue::kGeluBias);
  EXPECT_EQ(ForwardArgs(2, 3, 4, false, true).epilogue, Epilogue::kGelu);
  EXPECT_EQ(InputGradArgs(2, 3, 4).beta, 1.0f);
  EXPECT_EQ(WeightGradArgs(2, 3, 4).beta, 1.0f);
  EXPECT_EQ(ForwardArgs(2, 3, 4, true, false).beta, 0.0f);
}

}  // namespace
}  // namespace anneal
