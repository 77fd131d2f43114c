// anneal eval: the mean validation loss, perplexity and tokens of a checkpoint's (or a Hugging Face
// folder's) weights on a prepared dataset — the trainer's own validation (train/trainer.h
// RunEvaluation), so a checkpoint's eval equals the validation loss its run logged at that step
// given the same data settings, which default to that run's (the checkpoint's lineage config).
#include <charconv>
#include <cmath>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "ckpt/hf_folder.h"
#include "cli/commands.h"
#include "core/env.h"
#include "train/trainer.h"

namespace anneal::cli {

namespace {

struct EvalArgs {
  std::string checkpoint, data, split = "val";
  int batches = 0, batch_size = 0, seq_len = 0;
  bool json = false;
  std::vector<std::string> sets;
};

// The model keys of c, as --set overrides.
std::vector<std::string> ModelSets(const ModelConfig& c) {
  auto f = [](double v) {
    std::ostringstream o;
    o.precision(9);
    o << v;
    return o.str();
  };
  std::vector<std::string> s = {"model.family=" + c.family,           "model.vocab_size=" + std::to_string(c.vocab_size),
                                "model.max_seq_len=" + std::to_string(c.max_seq_len),
                                "model.n_layer=" + std::to_string(c.n_layer), "model.n_head=" + std::to_string(c.n_head),
                                "model.n_embd=" + std::to_string(c.n_embd)};
  if (c.family != "gpt2") {
    s.push_back("model.n_kv_head=" + std::to_string(c.n_kv_head));
    s.push_back("model.intermediate_size=" + std::to_string(c.intermediate_size));
    s.push_back("model.norm_eps=" + f(c.norm_eps));
    s.push_back("model.rope_theta=" + f(c.rope_theta));
    s.push_back("model.tie_embeddings=" + std::string(c.tie_embeddings ? "true" : "false"));
    if (c.rope_scaling.on()) {
      s.push_back("model.rope_scaling.factor=" + f(c.rope_scaling.factor));
      s.push_back("model.rope_scaling.low_freq_factor=" + f(c.rope_scaling.low_freq_factor));
      s.push_back("model.rope_scaling.high_freq_factor=" + f(c.rope_scaling.high_freq_factor));
      s.push_back("model.rope_scaling.original_max_seq_len=" + std::to_string(c.rope_scaling.original_max_seq_len));
    }
  }
  return s;
}

Status RunEval(const EvalArgs& a) {
  if (a.split != "val" && a.split != "train") {
    return InvalidInput("--split '" + a.split + "' must be val or train");
  }
  std::vector<std::string> sets;
  int run_batches = 8;
  if (Env::Default().Exists(a.checkpoint + "/config.json")) {  // a Hugging Face folder: its model
    ANNEAL_ASSIGN_OR_RETURN(ModelConfig mc, ReadHfConfig(a.checkpoint));  // the weights: RunEvaluation's init_from
    sets = ModelSets(mc);
    sets.push_back("data.seq_len=" + std::to_string(std::min(mc.max_seq_len, 1024)));
    sets.push_back("train.init_from=" + a.checkpoint);
  } else {  // a checkpoint: its run's settings (the lineage config), model and data alike
    ANNEAL_ASSIGN_OR_RETURN(CheckpointRef ref, ResolveCheckpoint(a.checkpoint));
    ANNEAL_ASSIGN_OR_RETURN(std::string text, ref.store->Get(ref.name + "/manifest.json"));
    const nlohmann::json m = nlohmann::json::parse(text, nullptr, false);
    nlohmann::json lineage;
    if (m.is_object() && m.contains("lineage") && m.at("lineage").is_object() && m.at("lineage").contains("config")) {
      lineage = m.at("lineage").at("config");
    }
    if (lineage.is_object() && lineage.contains("model.n_layer")) {
      for (const auto& [k, v] : lineage.items()) {
        if (k.rfind("model.", 0) == 0 || k == "data.seq_len" || k == "data.batch_size" || k == "data.seed") {
          sets.push_back(k + "=" + (v.is_string() ? v.get<std::string>() : v.dump()));
        }
        if (k == "train.eval_batches") {
          const std::string n = v.is_string() ? v.get<std::string>() : v.dump();
          int parsed = 0;
          if (std::from_chars(n.data(), n.data() + n.size(), parsed).ec == std::errc() && parsed > 0) run_batches = parsed;
        }
      }
    } else {  // an imported checkpoint: the model from its manifest
      ANNEAL_ASSIGN_OR_RETURN(ModelConfig c, ReadCheckpointModelConfig(*ref.store, ref.name));
      sets = ModelSets(c);
      sets.push_back("data.seq_len=" + std::to_string(std::min(c.max_seq_len, 1024)));
    }
    // the checkpoint itself (not "the newest", which a running job may change meanwhile)
    const bool is_step = ref.name.size() == 13 && a.checkpoint.find(ref.name) != std::string::npos;
    sets.push_back("train.init_from=" + (is_step ? a.checkpoint : a.checkpoint + "/" + ref.name));
  }
  sets.push_back("data.dir=" + a.data);
  sets.push_back("data.eval_split=" + a.split);
  sets.push_back("train.eval_batches=" + std::to_string(a.batches > 0 ? a.batches : run_batches));
  if (a.batch_size > 0) sets.push_back("data.batch_size=" + std::to_string(a.batch_size));
  if (a.seq_len > 0) sets.push_back("data.seq_len=" + std::to_string(a.seq_len));
  sets.insert(sets.end(), a.sets.begin(), a.sets.end());  // the caller's last word (dist.*, train.kernels, ...)
  ANNEAL_ASSIGN_OR_RETURN(TrainConfig c, TrainConfig::Parse("", sets, "anneal eval"));
  std::fputs(c.DeprecationText().c_str(), stderr);
  auto log = [&](const std::string& line) {
    if (!a.json) std::printf("%s\n", line.c_str());
  };
  ANNEAL_ASSIGN_OR_RETURN(EvalResult r, RunEvaluation(c, log));
  const double ppl = std::exp(r.loss);
  if (a.json) {
    std::printf("%s\n", nlohmann::json({{"loss", r.loss}, {"perplexity", ppl}, {"tokens", r.tokens},
                                        {"batches", r.batches}, {"batch_size", c.data.batch_size},
                                        {"seq_len", c.data.seq_len}, {"split", a.split}})
                            .dump()
                            .c_str());
  } else {
    std::printf("%s loss %.6f | perplexity %.3f | %llu tokens in %d batches of %d x %d\n", a.split.c_str(), r.loss,
                ppl, static_cast<unsigned long long>(r.tokens), r.batches, c.data.batch_size, c.data.seq_len);
  }
  return Status::Ok();
}

}  // namespace

void AddEvalCommand(CLI::App& app, RunFn* run) {
  auto a = std::make_shared<EvalArgs>();
  CLI::App* c = app.add_subcommand(
      "eval", "Mean validation loss and perplexity of a checkpoint's (or a Hugging Face folder's) weights.");
  c->add_option("--checkpoint", a->checkpoint,
                "A step-NNNNNNNN folder, a checkpoint_dir (newest is used), or a Hugging Face model folder")
      ->required();
  c->add_option("--data", a->data, "A prepared dataset (anneal prep), or a folder of llm.c shards")->required();
  c->add_option("--batches", a->batches, "Batches to evaluate (0: the run's train.eval_batches, or 8)");
  c->add_option("--batch-size", a->batch_size, "Rows per batch (0: the run's data.batch_size)");
  c->add_option("--seq-len", a->seq_len, "Tokens per row (0: the run's data.seq_len)");
  c->add_option("--split", a->split, "The split, read in order from its start: val or train")->capture_default_str();
  c->add_flag("--json", a->json, "One JSON object on stdout: loss, perplexity, tokens, batches");
  c->add_option("--set", a->sets, "KEY=VALUE: any training key (train.kernels, dist.tp under anneal launch, ...)");
  c->callback([run, a] { *run = [a] { return RunEval(*a); }; });
}

}  // namespace anneal::cli
