// Hugging Face transformers' model folders (docs/formats/hf.md): config.json, generation_config.json
// and model.safetensors — or model-0000K-of-0000N.safetensors shards with model.safetensors.index.json
// — holding the model class's tensors (the family's HfTensors: anneal's canonical tensors stacked
// and, for GPT-2's Conv1D, transposed) in F32, BF16 or F16, with __metadata__ {"format": "pt"}.
// Written from, and read into, the whole model's canonical parameters: a flat fp32 buffer in the
// whole model's ParamLayout (vocabulary padding rows zero).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/config.h"

namespace anneal {

class Tokenizer;

struct HfExportOptions {
  std::string dtype = "f32";              // f32 | bf16 | f16 (rounded to nearest even)
  uint64_t max_shard_bytes = 5000000000;  // a file is cut before a tensor that would pass this
  // The tokenizer the model was trained with, written beside it as Hugging Face tokenizer files
  // (data/hf_tokenizer.h) when its vocabulary is the model's; null: none.
  const Tokenizer* tokenizer = nullptr;
};

// Writes the folder `out_dir` (created; files replaced atomically) for config c whose canonical
// parameters are `params` (ParamLayout(c).total_floats() floats). An o.tokenizer of another
// vocabulary size than the model's is an error (exit 2).
Status ExportHfFolder(const ModelConfig& c, const std::vector<float>& params, const std::string& out_dir,
                      const HfExportOptions& o);

// A folder read back: the model's config (the family from config.json's architectures) and its
// canonical parameters, each value exactly its stored one (F32 as is, BF16 and F16 widened).
struct HfModel {
  ModelConfig config;
  std::vector<float> params;
  std::string dtype;  // the tensors' dtype in the folder: f32, bf16 or f16 (the first tensor's)
};
// The folder's model (config.json alone; the family from its "architectures"), errors as below.
Result<ModelConfig> ReadHfConfig(const std::string& dir);
// Errors (exit 2) name the file and the field, the tensor, or the shard: an architecture or a field
// anneal does not take, a missing or extra tensor, a wrong shape or dtype, a missing shard, a
// truncated file, a header whose offsets do not fit its data.
Result<HfModel> ImportHfFolder(const std::string& dir);

// "5GB", "500MB", "64KB", "1000" (bytes; powers of 1000 as transformers' max_shard_size).
Result<uint64_t> ParseShardSize(const std::string& text);

}  // namespace anneal
