#include "kernels/registry.h"
#include "model/decoder.h"

#include <gtest/gtest.h>

#include <map>

namespace anneal {
namespace {

// Collects every released range into a flat vector, and checks the contract on the way.
class RecordingSink : public GradSink {
 public:
  explicit RecordingSink(size_t total) : flat(total, 0.0f) {}
  DevPtr Acquire(size_t begin, size_t end) override {
    EXPECT_LT(begin, end);
    EXPECT_FALSE(held.count(begin)) << "range acquired twice";
    held[begin] = std::vector<float>(end - begin, 0.0f);
    order.push_back(begin);
    return DevPtr{held[begin].data(), DType::kF32};
  }
  void Release(size_t begin, size_t end) override {
    ASSERT_TRUE(held.count(begin)) << "released without Acquire";
    EXPECT_EQ(held[begin].size(), end - begin);
    for (size_t i = begin; i < end; ++i) flat[i] += held[begin][i - begin];
    covered += end - begin;
    held.erase(begin);
  }
  std::vector<float> flat;
  std::map<size_t, std::vector<float>> held;
  std::vector<size_t> order;
  size_t covered = 0;
};

// The gradients handed to a GradSink range by range equal those of the flat buffer, every range is
// released once, and the whole vector is covered (ZeRO-2 relies on this).
TEST(DecoderModelTest, GradSinkGetsTheSameGradientsAsTheFlatBuffer) {
  const ModelConfig cfg = ModelConfig::Make(300, 16, 3, 4, 32).value();
  DecoderModel a(cfg, CpuBackend()), b(cfg, CpuBackend());
  a.InitWeights(5);
  b.InitWeights(5);
  RecordingSink sink(b.num_floats());
  b.set_grad_sink(&sink);
  EXPECT_EQ(b.grads(), nullptr);
  std::vector<int32_t> in(2 * 16), tgt(2 * 16);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int32_t>((i * 37) % 300), tgt[i] = static_cast<int32_t>((i * 11 + 3) % 300);
  a.ZeroGrad();
  const double la = a.Forward(in.data(), tgt.data(), 2, 16, 1.0f / 32);
  a.Backward();
  const double lb = b.Forward(in.data(), tgt.data(), 2, 16, 1.0f / 32);
  b.Backward();
  EXPECT_EQ(la, lb);
  EXPECT_TRUE(sink.held.empty()) << "a range was never released";
  EXPECT_EQ(sink.covered, b.num_floats());
  EXPECT_EQ(sink.order.size(), static_cast<size_t>(cfg.n_layer) + 2);  // embeddings, ln_f, each layer
  for (size_t i = 0; i < a.num_floats(); ++i) ASSERT_EQ(a.grads()[i], sink.flat[i]) << "float " << i;
}

}  // namespace
}  // namespace anneal
