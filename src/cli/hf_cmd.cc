// anneal export / anneal import: checkpoints to and from Hugging Face transformers' model folders
// (ckpt/hf_folder.h; docs/formats/hf.md).
#include <cstdio>

#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "ckpt/hf_folder.h"
#include "cli/commands.h"
#include "data/tokenizer.h"
#include "kernels/registry.h"

namespace anneal::cli {

namespace {

struct ExportArgs {
  std::string format = "hf", checkpoint, out_dir, dtype = "f32", max_shard = "5GB", tokenizer;
};

struct ImportArgs {
  std::string format = "hf", hf_dir, checkpoint_dir;
};

Status CheckFormat(const std::string& f) {
  if (f != "hf") return InvalidInput("--format '" + f + "' is not one anneal writes or reads: use hf");
  return Status::Ok();
}

// The whole model's named tensors over a host buffer (the canonical parameters).
CheckpointTensors HostTensors(const ModelConfig& c, const ParamLayout& layout, std::vector<float>* params) {
  CheckpointTensors t;
  t.model = &c;
  t.layout = &layout;
  t.backend = &CpuBackend();
  t.stream = CpuBackend().DefaultStream();
  t.params = DevPtr{params->data(), DType::kF32};
  return t;
}

Status RunExport(const ExportArgs& a) {
  ANNEAL_RETURN_IF_ERROR(CheckFormat(a.format));
  HfExportOptions o;
  o.dtype = a.dtype;
  ANNEAL_ASSIGN_OR_RETURN(o.max_shard_bytes, ParseShardSize(a.max_shard));
  ANNEAL_ASSIGN_OR_RETURN(CheckpointRef ref, ResolveCheckpoint(a.checkpoint));
  ANNEAL_ASSIGN_OR_RETURN(ModelConfig c, ReadCheckpointModelConfig(*ref.store, ref.name));
  const ParamLayout layout(c);
  std::vector<float> params(layout.total_floats(), 0.0f);
  ANNEAL_RETURN_IF_ERROR(LoadCheckpoint(*ref.store, ref.name, HostTensors(c, layout, &params), nullptr));
  std::unique_ptr<Tokenizer> tok;
  if (a.tokenizer != "none") {
    ANNEAL_ASSIGN_OR_RETURN(std::string tok_name, TokenizerOfCheckpoint(a.tokenizer, *ref.store, ref.name));
    ANNEAL_ASSIGN_OR_RETURN(tok, Tokenizer::Load(tok_name));
    o.tokenizer = tok.get();
  }
  ANNEAL_RETURN_IF_ERROR(ExportHfFolder(c, params, a.out_dir, o));
  std::printf("exported %s (%s) to %s as %s\n", ref.name.c_str(), c.ToString().c_str(), a.out_dir.c_str(),
              a.dtype.c_str());
  return Status::Ok();
}

Status RunImport(const ImportArgs& a) {
  ANNEAL_RETURN_IF_ERROR(CheckFormat(a.format));
  ANNEAL_ASSIGN_OR_RETURN(HfModel m, ImportHfFolder(a.hf_dir));
  ANNEAL_ASSIGN_OR_RETURN(auto store, OpenCheckpointStore(a.checkpoint_dir));
  ANNEAL_ASSIGN_OR_RETURN(auto existing, FindNewestCheckpoint(*store));
  if (existing) {
    return InvalidInput(a.checkpoint_dir + " already holds checkpoint " + *existing +
                        ": import into an empty checkpoint folder (nothing was written)");
  }
  const ParamLayout layout(m.config);
  CheckpointLineage lineage;
  lineage.config_json = nlohmann::json({{"imported_from", a.hf_dir}, {"dtype", m.dtype}}).dump();
  ANNEAL_RETURN_IF_ERROR(SaveCheckpoint(*store, HostTensors(m.config, layout, &m.params), TrainerState{}, lineage));
  std::printf("imported %s (%s, %s) as %s/%s (weights only)\n", a.hf_dir.c_str(), m.config.ToString().c_str(),
              m.dtype.c_str(), a.checkpoint_dir.c_str(), CheckpointName(0).c_str());
  return Status::Ok();
}

}  // namespace

void AddHfCommands(CLI::App& app, RunFn* run) {
  auto e = std::make_shared<ExportArgs>();
  CLI::App* x = app.add_subcommand(
      "export", "Write a checkpoint as a Hugging Face transformers model folder (from_pretrained loads it).");
  x->add_option("--format", e->format, "Folder format: hf")->capture_default_str();
  x->add_option("checkpoint", e->checkpoint, "A step-NNNNNNNN folder, or a checkpoint_dir (newest is used)")->required();
  x->add_option("out_dir", e->out_dir, "The folder to write (new, or empty)")->required();
  x->add_option("--dtype", e->dtype, "Tensor dtype: f32, bf16 or f16 (rounded to nearest even)")->capture_default_str();
  x->add_option("--max-shard-size", e->max_shard, "Cut model-0000K-of-0000N.safetensors shards at this size")
      ->capture_default_str();
  x->add_option("--tokenizer", e->tokenizer,
                "The tokenizer the model was trained with (gpt2, cl100k_base, o200k_base, llama3 or a folder; default: "
                "its dataset's, recorded in the checkpoint, else gpt2), written as tokenizer.json and "
                "tokenizer_config.json, and vocab.json and merges.txt for GPT-2's (none: no files)");
  x->callback([run, e] { *run = [e] { return RunExport(*e); }; });

  auto i = std::make_shared<ImportArgs>();
  CLI::App* m = app.add_subcommand(
      "import", "Make a checkpoint (weights only, step 0) from a Hugging Face transformers model folder.");
  m->add_option("--format", i->format, "Folder format: hf")->capture_default_str();
  m->add_option("hf_dir", i->hf_dir, "A folder with config.json and model.safetensors (or shards and their index)")
      ->required();
  m->add_option("checkpoint_dir", i->checkpoint_dir, "An empty checkpoint folder (or s3:// prefix) to write")->required();
  m->callback([run, i] { *run = [i] { return RunImport(*i); }; });
}

}  // namespace anneal::cli
