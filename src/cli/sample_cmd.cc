// anneal sample: text from a checkpoint (KV-cached generation; temperature, top-k, seed).
#include <cstdio>

#include "ckpt/checkpoint.h"
#include "train/checkpoint_tensors.h"
#include "cli/commands.h"
#include "data/tokenizer.h"
#include "kernels/registry.h"
#include "model/generate.h"

namespace anneal::cli {

namespace {

struct SampleArgs {
  std::string checkpoint;
  std::string prompt = "\n";
  std::string tokenizer;  // "": the checkpoint's dataset's, else gpt2
  SampleOptions o;
  bool stop_at_eot = true;
};

Status RunSample(SampleArgs& a) {
  ANNEAL_ASSIGN_OR_RETURN(CheckpointRef ref, ResolveCheckpoint(a.checkpoint));
  ObjectStore* store = ref.store.get();
  const std::string& name = ref.name;
  ANNEAL_ASSIGN_OR_RETURN(ModelConfig cfg, ReadCheckpointModelConfig(*store, name));
  DecoderModel model(cfg, CpuBackend());
  ANNEAL_RETURN_IF_ERROR(LoadCheckpoint(*store, name, TensorsOf(model, nullptr), nullptr));
  ANNEAL_ASSIGN_OR_RETURN(std::string tok_name, TokenizerOfCheckpoint(a.tokenizer, *store, name));
  ANNEAL_ASSIGN_OR_RETURN(auto tok, Tokenizer::Load(tok_name));
  if (tok->vocab_size() != static_cast<uint32_t>(cfg.vocab_size)) {
    return InvalidInput("tokenizer '" + tok_name + "' has " + std::to_string(tok->vocab_size()) +
                        " tokens but the checkpoint's model has " + std::to_string(cfg.vocab_size) +
                        ": give --tokenizer the one the model was trained with");
  }
  std::vector<uint32_t> prompt;
  tok->NewEncoder()->Encode(a.prompt, &prompt);
  KvGenerator gen(model, static_cast<int>(prompt.size()) + a.o.max_tokens);  // the cache for these positions only
  std::printf("%s", a.prompt.c_str());
  std::fflush(stdout);
  auto out = gen.Generate(prompt, a.o, a.stop_at_eot ? static_cast<int64_t>(tok->eos()) : -1, [&](uint32_t id) {
    std::string piece(tok->TokenBytes(id));
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  });
  std::printf("\n");
  return out.ok() ? Status::Ok() : out.status();
}

}  // namespace

void AddSampleCommand(CLI::App& app, RunFn* run) {
  auto a = std::make_shared<SampleArgs>();
  CLI::App* c = app.add_subcommand("sample", "Generate text from a checkpoint.");
  c->add_option("--checkpoint", a->checkpoint, "A step-NNNNNNNN folder, or a checkpoint_dir (newest is used)")->required();
  c->add_option("--prompt", a->prompt, "Text to continue")->capture_default_str();
  c->add_option("--max-tokens", a->o.max_tokens, "Tokens to generate")->capture_default_str();
  c->add_option("--temperature", a->o.temperature, "Sampling temperature (0 = greedy)")->capture_default_str();
  c->add_option("--top-k", a->o.top_k, "Sample from the k most likely tokens (0 = all)")->capture_default_str();
  c->add_option("--seed", a->o.seed, "Sampling seed")->capture_default_str();
  c->add_option("--tokenizer", a->tokenizer,
                "Tokenizer the model was trained with (default: its dataset's, recorded in the checkpoint, else gpt2)");
  c->callback([run, a] { *run = [a] { return RunSample(*a); }; });
}

}  // namespace anneal::cli
