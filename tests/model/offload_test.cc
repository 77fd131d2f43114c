// Activation offload (DecoderModel::set_offload): with full recomputation each layer's output goes to
// host memory after the layer runs and comes back before the backward that recomputes from it. On the
// sealed backend (tests/testing/sealed_backend.h: device memory the host cannot touch outside the
// backend's ops and copies) the losses and gradients equal those of the same model without offload,
// bit for bit, over passes that reuse the device ring, while the device holds 3 layer outputs instead
// of every layer's (ModelConfig::ActivationFloats with offload is what it allocates).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kernels/registry.h"
#include "model/decoder.h"
#include "tensor/host_copy.h"
#include "testing/sealed_backend.h"

namespace anneal {
namespace {

// Both ways the copies can run: when issued (one stream, as on the host), and as late as a GPU's copy
// stream may run them (tests/testing/sealed_backend.h: queued until their event is waited for), where
// a missing wait between the copy and the compute streams gives stale layer inputs.
class OffloadTest : public ::testing::TestWithParam<bool> {};

TEST_P(OffloadTest, LayerInputsFromHostMemoryGiveTheSameGradientsWithThreeOnTheDevice) {
  const bool deferred = GetParam();
  testing::SealedBackend sealed(deferred ? "sealed-offload-deferred" : "sealed-offload", CpuBackend());
  sealed.set_deferred_copy_stream(deferred);
  const ModelConfig cfg = *ModelConfig::Make(300, 16, 6, 2, 16);
  const int B = 2, T = 16, N = B * T;
  DecoderModel kept(cfg, sealed), offloaded(cfg, sealed);
  for (DecoderModel* m : {&kept, &offloaded}) {
    m->set_recompute(Recompute::kFull);
    m->InitWeights(7);
  }
  offloaded.set_offload(true);
  std::vector<int32_t> in(N), tgt(N);
  for (int pass = 0; pass < 3; ++pass) {  // the ring's places are reused pass after pass
    for (int i = 0; i < N; ++i) {
      in[i] = (i * 37 + pass * 11) % 300;
      tgt[i] = (i * 53 + pass * 7 + 1) % 300;
    }
    const double a = kept.Forward(in.data(), tgt.data(), B, T, 1.0f / N);
    kept.Backward();
    const double b = offloaded.Forward(in.data(), tgt.data(), B, T, 1.0f / N);
    offloaded.Backward();
    ASSERT_TRUE(kept.status().ok() && offloaded.status().ok()) << offloaded.status().message();
    EXPECT_EQ(a, b) << "pass " << pass;
  }
  // Layers 0..2 went out and came back each pass; the last three stayed in the ring. Nothing was left
  // in flight that the backward needed (only copies nobody waits for may still be queued).
  EXPECT_EQ(offloaded.offloader()->copies_out(), 3 * 3);
  EXPECT_EQ(offloaded.offloader()->copies_in(), 3 * 3);
  // The gradients accumulated over the three passes: the same bits.
  const size_t n = kept.num_floats();
  const HostRead ga(sealed, kept.grads_ptr(), n), gb(sealed, offloaded.grads_ptr(), n);
  EXPECT_EQ(std::memcmp(ga.data(), gb.data(), n * sizeof(float)), 0);
  // Three layer outputs on the device instead of six: (6 - 3) x N x C floats fewer, as the formula says.
  EXPECT_EQ(offloaded.ActivationFloatsAllocated(), cfg.ActivationFloats(B, T, Recompute::kFull, ModelShard::Whole(), 1, true));
  EXPECT_EQ(kept.ActivationFloatsAllocated() - offloaded.ActivationFloatsAllocated(), static_cast<size_t>(3 * N * 16));
}

INSTANTIATE_TEST_SUITE_P(CopyStream, OffloadTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "Deferred" : "Immediate"; });

}  // namespace
}  // namespace anneal
