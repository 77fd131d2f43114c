// A model split by tensor parallelism (ranks as threads, joined by an in-memory group) and by
// pipeline stages (activations handed over by hand) computes the whole model's loss and gradients:
// the layers above the communicator, checked without processes (the real thing: the e2e grid).
#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <cmath>
#include <thread>
#include <tuple>

#include "kernels/registry.h"
#include "model/box.h"
#include "model/decoder.h"
#include "parallel/plan.h"
#include "parallel/tensor_parallel.h"
#include "testing/small_models.h"

namespace anneal {
namespace {

// tp threads; each call publishes this rank's buffer, then every rank sums (or gathers) all of them
// in rank order, so all get the same bits, as from a real deterministic group.
class ThreadGroup {
 public:
  explicit ThreadGroup(int n) : n_(n), ptrs_(n), barrier_(n) {}
  class Member : public TensorParallelGroup {
   public:
    Member(ThreadGroup* g, int rank) : g_(g), rank_(rank) {}
    void AllReduceSum(const TensorView& v, const Event&) override { Sum(v.f32(), v.numel()); }
    void ReduceScatterSum(const TensorView& x, const TensorView& y, const Event&) override {
      ReduceScatter(x.f32(), x.numel(), y.f32());
    }
    void AllGatherInPlace(const TensorView& x, const Event&) override { GatherInPlace(x.f32(), x.numel()); }
    void AllGather(const TensorView& in, const TensorView& out, const Event&) override {
      Gather(in.f64(), in.numel(), out.f64());
    }

   private:
    void Sum(float* x, size_t n) {
      g_->ptrs_[rank_] = x;
      g_->barrier_.arrive_and_wait();
      std::vector<float> sum(n, 0.0f);
      for (int r = 0; r < g_->n_; ++r) {
        const float* p = static_cast<const float*>(g_->ptrs_[r]);
        for (size_t i = 0; i < n; ++i) sum[i] += p[i];
      }
      g_->barrier_.arrive_and_wait();
      std::copy(sum.begin(), sum.end(), x);
    }
    void ReduceScatter(const float* x, size_t n, float* y) {
      std::vector<float> sum(n);
      std::copy(x, x + n, sum.begin());
      Sum(sum.data(), n);
      const size_t piece = n / g_->n_;
      std::copy(sum.begin() + rank_ * piece, sum.begin() + (rank_ + 1) * piece, y);
    }
    void GatherInPlace(float* x, size_t n) {
      g_->ptrs_[rank_] = x;
      g_->barrier_.arrive_and_wait();
      const size_t piece = n / g_->n_;
      std::vector<float> all(n);
      for (int r = 0; r < g_->n_; ++r) {
        const float* p = static_cast<const float*>(g_->ptrs_[r]);
        std::copy(p + r * piece, p + (r + 1) * piece, all.begin() + r * piece);
      }
      g_->barrier_.arrive_and_wait();
      std::copy(all.begin(), all.end(), x);
    }
    void Gather(const double* in, size_t n, double* out) {
      g_->ptrs_[rank_] = const_cast<double*>(in);
      g_->barrier_.arrive_and_wait();
      for (int r = 0; r < g_->n_; ++r) {
        const double* p = static_cast<const double*>(g_->ptrs_[r]);
        std::copy(p, p + n, out + r * n);
      }
      g_->barrier_.arrive_and_wait();
    }
    ThreadGroup* g_;
    int rank_;
  };

 private:
  int n_;
  std::vector<void*> ptrs_;
  std::barrier<> barrier_;
};

struct Batch {
  int B = 2, T = 8;
  std::vector<int32_t> in, tgt;
  explicit Batch(int V) : in(16), tgt(16) {
    for (int i = 0; i < 16; ++i) in[i] = (i * 37 + 5) % V, tgt[i] = (i * 11 + 3) % V;
  }
};

// Assembles the canonical gradient of every tensor from the shards' boxes of their gradients.
void Collect(const DecoderModel& m, std::map<std::string, std::vector<float>>* out) {
  const ParamLayout whole(m.config());
  for (const ParamInfo& p : m.layout().params()) {
    if (!p.owner(m.shard())) continue;
    std::vector<float>& t = (*out)[p.name];
    t.resize(whole.Find(p.name)->size, 0.0f);
    CopyOverlap(MakeBoxPart(p.box_offset, p.box_length), m.grads() + p.offset,
                MakeBoxPart(std::vector<int64_t>(p.shape.size(), 0), p.shape), t.data());
  }
}

void ExpectClose(const std::map<std::string, std::vector<float>>& got, const DecoderModel& ref) {
  for (const ParamInfo& p : ref.layout().params()) {
    auto it = got.find(p.name);
    ASSERT_NE(it, got.end()) << p.name;
    double worst = 0, norm = 0;
    for (size_t i = 0; i < p.size; ++i) {
      norm = std::max(norm, static_cast<double>(std::fabs(ref.grads()[p.offset + i])));
      worst = std::max(worst, static_cast<double>(std::fabs(ref.grads()[p.offset + i] - it->second[i])));
    }
    EXPECT_LE(worst, 1e-5 * norm + 1e-9) << p.name;
  }
}

ModelConfig Small(const std::string& family, int L) { return SmallModel(family, 300, 8, L, 4, 32); }

class ShardedModelTest : public ::testing::TestWithParam<std::tuple<Recompute, std::string>> {
 protected:
  Recompute rc() const { return std::get<0>(GetParam()); }
  const std::string& family() const { return std::get<1>(GetParam()); }
};

// Tensor parallelism, without and with sequence parallelism.
void CheckTensorParallel(Recompute rc, const std::string& family, bool sp) {
  const int tp = 2;
  const ModelConfig cfg = Small(family, 2).PaddedFor(tp);
  const Batch b(cfg.vocab_size);
  DecoderModel whole(cfg, RefBackend());
  whole.set_recompute(rc);
  whole.InitWeights(7);
  const double loss = whole.Forward(b.in.data(), b.tgt.data(), b.B, b.T, 1.0f / 16);
  whole.Backward();
  ThreadGroup g(tp);
  std::vector<std::unique_ptr<ThreadGroup::Member>> members;
  std::vector<std::unique_ptr<TensorParallelLayers>> layers;
  std::vector<std::unique_ptr<DecoderModel>> shards;
  for (int r = 0; r < tp; ++r) {
    members.push_back(std::make_unique<ThreadGroup::Member>(&g, r));
    ModelShard s;
    s.tp = tp;
    s.tp_rank = r;
    s.sp = sp;
    layers.push_back(std::make_unique<TensorParallelLayers>(cfg, s, members[r].get(), RefBackend()));
    shards.push_back(std::make_unique<DecoderModel>(cfg, RefBackend(), s, layers[r].get()));
    shards[r]->set_recompute(rc);
    shards[r]->InitWeights(7);
  }
  EXPECT_LT(shards[0]->num_floats(), whole.num_floats());
  std::vector<double> losses(tp);
  std::vector<std::thread> threads;
  for (int r = 0; r < tp; ++r) {
    threads.emplace_back([&, r] {
      losses[r] = shards[r]->Forward(b.in.data(), b.tgt.data(), b.B, b.T, 1.0f / 16);
      shards[r]->Backward();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_NEAR(losses[0], loss, 1e-6 * loss);
  EXPECT_EQ(losses[0], losses[1]);  // every slice computes the same loss, bit for bit
  std::map<std::string, std::vector<float>> got;
  for (auto& s : shards) Collect(*s, &got);
  ExpectClose(got, whole);
  if (sp) {  // half the rows of the residual stream: less activation memory, exactly as the formula says
    EXPECT_EQ(shards[0]->StageFloats(b.B, b.T), 8u * 32);
    EXPECT_EQ(shards[0]->ActivationFloatsAllocated(), cfg.ActivationFloats(b.B, b.T, rc, shards[0]->shard(), 1));
  }
}

std::string ParamName(const ::testing::TestParamInfo<std::tuple<Recompute, std::string>>& info) {
  static const char* const kNames[] = {"none", "selective", "full"};
  std::string f = std::get<1>(info.param);
  std::replace(f.begin(), f.end(), '-', '_');
  return std::string(kNames[static_cast<int>(std::get<0>(info.param))]) + "_" + f;
}

TEST_P(ShardedModelTest, TensorParallelSlicesAddUpToTheWholeModel) { CheckTensorParallel(rc(), family(), false); }
TEST_P(ShardedModelTest, SequenceParallelRowsAddUpToTheWholeModel) { CheckTensorParallel(rc(), family(), true); }

TEST_P(ShardedModelTest, PipelineStagesChainToTheWholeModel) {
  const ModelConfig cfg = Small(family(), 3);
  const Batch b(cfg.vocab_size);
  DecoderModel whole(cfg, RefBackend());
  whole.InitWeights(7);
  const double loss = whole.Forward(b.in.data(), b.tgt.data(), b.B, b.T, 1.0f / 16);
  whole.Backward();
  ModelShard s0, s1;
  s0.layer_end = 1;
  s1.layer_begin = 1;
  DecoderModel a(cfg, RefBackend(), s0, nullptr), z(cfg, RefBackend(), s1, nullptr);
  for (DecoderModel* m : {&a, &z}) {
    m->set_recompute(rc());
    m->InitWeights(7);
  }
  EXPECT_EQ(a.ForwardStage(0, b.in.data(), b.tgt.data(), b.B, b.T, 1.0f / 16), 0.0);
  const size_t NC = 16 * 32;
  std::copy(a.StageOutput(0).f32(), a.StageOutput(0).f32() + NC, z.StageInput(0, b.B, b.T).f32());
  EXPECT_NEAR(z.ForwardStage(0, b.in.data(), b.tgt.data(), b.B, b.T, 1.0f / 16), loss, 1e-6 * loss);
  z.BackwardStage(0, DevPtr{});
  a.BackwardStage(0, z.InputGrad());
  // The tied embedding: the first stage's lookup gradient plus the last stage's LM-head gradient
  // (an untied head is the last stage's own tensor, and wte the first stage's alone).
  const ParamInfo* wa = a.layout().Find("wte.weight");
  const ParamInfo* wz = z.layout().Find("wte.weight");
  if (cfg.tie_embeddings) {
    ASSERT_TRUE(wz->tied_copy);
    for (size_t i = 0; i < wa->stored_size; ++i) a.grads()[wa->offset + i] += z.grads()[wz->offset + i];
  } else {
    EXPECT_EQ(wz, nullptr);
    ASSERT_NE(z.layout().Find("lm_head.weight"), nullptr);
  }
  std::map<std::string, std::vector<float>> got;
  Collect(a, &got);
  Collect(z, &got);
  ExpectClose(got, whole);
}

INSTANTIATE_TEST_SUITE_P(Recompute, ShardedModelTest,
                         ::testing::Combine(::testing::Values(Recompute::kNone, Recompute::kSelective, Recompute::kFull),
                                            ::testing::Values(std::string("gpt2"), std::string("llama"),
                                                              std::string("llama-mqa"))),
                         ParamName);

TEST(ShardedModelTest, ActivationFormulaMatchesEveryShardAndSlotCount) {
  for (const std::string family : {"gpt2", "llama", "llama-mqa"}) {
  const ModelConfig cfg = Small(family, 4).PaddedFor(2);
  ThreadGroup g(1);  // never called: one slot's forward is not run here
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    for (int slots : {1, 3}) {
      ModelShard s;
      s.layer_begin = 1;
      s.layer_end = 3;
      DecoderModel m(cfg, RefBackend(), s, nullptr);
      m.set_recompute(r);
      m.set_slots(slots);
      for (int i = 0; i < slots; ++i) m.StageInput(i, 2, 8);
      EXPECT_EQ(m.ActivationFloatsAllocated(), cfg.ActivationFloats(2, 8, r, s, slots)) << family;
    }
  }
  }
}

}  // namespace
}  // namespace anneal
