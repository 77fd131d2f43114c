// Golden parity with PyTorch (llm.c's test_gpt2 in spirit): tests/peers/torch_gpt2_golden.py builds
// the same GPT-2 from the same weights and batch in fp32 and fp64, tests/peers/hf_golden.py GPT-2
// and Llamas as transformers' own GPT2LMHeadModel and LlamaForCausalLM; each writes logits, loss,
// every gradient, and the losses, gradient norms and parameters of 10 AdamW steps. For every tensor a:
//   ||a - t64|| <= 3 ||t32 - t64|| + 1e-6 ||t64|| + 1e-7 sqrt(n)
// i.e. anneal is at least as close to the fp64 truth as PyTorch's own fp32, within a factor of 3.
// The files come from ANNEAL_GOLDEN (tests/peers/gpt2_vs_torch.sh and models_vs_hf.sh set it); without
// it the test is skipped, never passed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "kernels/registry.h"
#include "core/safetensors.h"
#include "model/decoder.h"
#include "optim/adamw.h"

namespace anneal {
namespace {

// The model the golden file describes: GPT-2 (tests/peers/torch_gpt2_golden.py) or a Llama
// (tests/peers/hf_golden.py, metadata family = llama).
Result<ModelConfig> ConfigOf(const std::map<std::string, std::string>& m) {
  auto i = [&](const char* k) { return std::stoi(m.at(k)); };
  auto f = [&](const char* k) { return std::stof(m.at(k)); };
  if (!m.count("family") || m.at("family") == "gpt2") return ModelConfig::Make(i("V"), i("maxT"), i("L"), i("H"), i("C"));
  ModelConfig c;
  c.family = m.at("family");
  c.vocab_size = i("V");
  c.max_seq_len = i("maxT");
  c.n_layer = i("L");
  c.n_head = i("H");
  c.n_embd = i("C");
  c.n_kv_head = i("KV");
  c.intermediate_size = i("F");
  c.rope_theta = f("theta");
  c.norm_eps = f("norm_eps");
  c.tie_embeddings = i("tied") != 0;
  c.rope_scaling = {f("rope_factor"), f("rope_low"), f("rope_high"), i("rope_orig")};
  ANNEAL_RETURN_IF_ERROR(c.Finish());
  return c;
}

struct Check {
  std::string name;
  double err = 0, bound = 0;
};

class GptVsTorch : public ::testing::TestWithParam<std::string> {
 protected:
  // ANNEAL_GOLDEN: one golden file, or several separated by ':' (each checked in turn).
  void SetUp() override {
    const char* paths = std::getenv("ANNEAL_GOLDEN");
    if (!paths) GTEST_SKIP() << "ANNEAL_GOLDEN not set (run tests/peers/gpt2_vs_torch.sh or models_vs_hf.sh)";
    std::string all = paths;
    for (size_t b = 0, e; b <= all.size(); b = e + 1) {
      e = std::min(all.find(':', b), all.size());
      if (e > b) paths_.push_back(all.substr(b, e - b));
    }
  }
  void Open(const std::string& path) {
    auto r = SafeTensorsReader::Open(Env::Default(), path);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    g_ = std::move(r).value();
    what_ = path.substr(path.rfind('/') + 1);
    checks_.clear();
  }
  void CheckGolden();
  std::vector<std::string> paths_;
  std::string what_;
  int Meta(const std::string& k) { return std::stoi(g_->metadata().at(k)); }
  float MetaF(const std::string& k) { return std::stof(g_->metadata().at(k)); }

  // Compares ours (n values, strided into rows of `stride` when padded) against f32./f64. tensors.
  void Compare(const std::string& what, const std::string& key32, const std::string& key64, const float* ours,
               size_t rows = 0, size_t cols = 0, size_t stride = 0) {
    auto t32 = g_->ReadF64(key32), t64 = g_->ReadF64(key64);
    ASSERT_TRUE(t32.ok() && t64.ok()) << key32;
    const size_t n = t64->size();
    double d_ours = 0, d_t32 = 0, norm = 0;
    for (size_t i = 0; i < n; ++i) {
      const double a = stride ? ours[(i / cols) * stride + i % cols] : ours[i];
      const double x = (*t64)[i];
      d_ours += (a - x) * (a - x);
      d_t32 += ((*t32)[i] - x) * ((*t32)[i] - x);
      norm += x * x;
    }
    (void)rows;
    Check c{what, std::sqrt(d_ours), 3 * std::sqrt(d_t32) + 1e-6 * std::sqrt(norm) + 1e-7 * std::sqrt(double(n))};
    EXPECT_LE(c.err, c.bound) << what << ": ||anneal - fp64|| = " << c.err << " > bound " << c.bound
                              << " (PyTorch fp32 error " << std::sqrt(d_t32) << ")";
    checks_.push_back(c);
  }

  void PrintWorst() {
    std::vector<Check> sorted = checks_;
    std::sort(sorted.begin(), sorted.end(), [](const Check& a, const Check& b) { return a.err / a.bound > b.err / b.bound; });
    std::printf("[%s] %s: %zu tensors checked; worst three (error / bound):\n", GetParam().c_str(), what_.c_str(),
                sorted.size());
    for (size_t i = 0; i < std::min<size_t>(3, sorted.size()); ++i) {
      std::printf("  %s: error %.3g = %.2f of its bound %.3g\n", sorted[i].name.c_str(), sorted[i].err,
                  sorted[i].err / sorted[i].bound, sorted[i].bound);
    }
  }

  std::unique_ptr<SafeTensorsReader> g_;
  std::vector<Check> checks_;
};

TEST_P(GptVsTorch, ForwardBackwardAndTenAdamWSteps) {
  for (const std::string& path : paths_) {
    SCOPED_TRACE(path);
    ASSERT_NO_FATAL_FAILURE(Open(path));
    ASSERT_NO_FATAL_FAILURE(CheckGolden());
  }
}

void GptVsTorch::CheckGolden() {
  Backend* k = BackendByName(GetParam());
  ASSERT_NE(k, nullptr);
  auto cfg = ConfigOf(g_->metadata());
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  DecoderModel model(*cfg, *k);
  for (const ParamInfo& p : model.layout().params()) {
    auto w = g_->ReadF32("param." + p.name);
    ASSERT_TRUE(w.ok()) << p.name;
    ASSERT_EQ(w->size(), p.size) << p.name;
    std::copy(w->begin(), w->end(), model.params() + p.offset);
  }
  const int B = Meta("B"), T = Meta("T"), V = cfg->vocab_size, Vp = cfg->padded_vocab;
  auto tokens = g_->ReadI32("input.tokens").value(), targets = g_->ReadI32("input.targets").value();

  // Logits and loss at the initial weights.
  double loss = model.Forward(tokens.data(), targets.data(), B, T, 0.0f);
  Compare("logits", "f32.logits", "f64.logits", model.logits(), static_cast<size_t>(B) * T, V, Vp);
  float lossf = static_cast<float>(loss);
  Compare("loss", "f32.loss", "f64.loss", &lossf);

  // Every gradient, by name.
  model.ZeroGrad();
  model.Forward(tokens.data(), targets.data(), B, T, 1.0f / (B * T));
  model.Backward();
  for (const ParamInfo& p : model.layout().params()) {
    Compare("grad " + p.name, "f32.grad." + p.name, "f64.grad." + p.name, model.grads() + p.offset);
  }

  // 10 AdamW steps on the same batch.
  AdamWOptions o;
  o.lr = o.min_lr = MetaF("lr");
  o.beta1 = MetaF("beta1");
  o.beta2 = MetaF("beta2");
  o.eps = MetaF("eps");
  o.weight_decay = MetaF("weight_decay");
  o.grad_clip = MetaF("max_norm");
  AdamW opt(model.layout(), *k, o);
  const int steps = Meta("steps");
  std::vector<float> losses, norms;
  for (int s = 0; s < steps; ++s) {
    model.ZeroGrad();
    losses.push_back(static_cast<float>(model.Forward(tokens.data(), targets.data(), B, T, 1.0f / (B * T))));
    model.Backward();
    StepStats st = opt.Step(model.params(), model.grads(), s);
    ASSERT_FALSE(st.skipped);
    norms.push_back(static_cast<float>(st.grad_norm));
  }
  Compare("losses of 10 steps", "f32.losses", "f64.losses", losses.data());
  Compare("grad norms of 10 steps", "f32.grad_norms", "f64.grad_norms", norms.data());
  for (const ParamInfo& p : model.layout().params()) {
    Compare("final " + p.name, "f32.final." + p.name, "f64.final." + p.name, model.params() + p.offset);
  }
  PrintWorst();
}

INSTANTIATE_TEST_SUITE_P(Backends, GptVsTorch, ::testing::Values("cpu", "ref"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace anneal
