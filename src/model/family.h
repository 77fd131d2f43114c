// Model families: what torchtitan's TrainSpec holds, one per family, in a registry. A family decides
// the blocks its decoder is made of (model/config.h Blocks), its canonical tensors (names, shapes,
// how tensor parallelism splits them, in checkpoint order), its presets, its field checks and its
// parameter count; DecoderModel (model/decoder.h) runs any of them, and parallel/, ckpt/ and train/
// see only ModelConfig, ParamLayout and the model.
//
// Each family lives in its own folder (model/gpt2/, model/llama/). A third family whose blocks are
// already here (Qwen 2: Llama with q/k/v biases; Mistral: Llama with a sliding attention window once
// the attention ops take a window) is a small folder: a ModelFamily and one line in family.cc.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/config.h"
#include "tensor/backend.h"

namespace anneal {

class ModelFamily {
 public:
  virtual ~ModelFamily() = default;
  virtual const char* name() const = 0;
  // Presets by name, each a whole ModelConfig (Finish()ed).
  virtual std::vector<std::string> PresetNames() const = 0;
  virtual Result<ModelConfig> Preset(const std::string& preset) const = 0;
  // The family's fixed fields and blocks set, every field checked: errors name the fields and the fix.
  virtual Status Finish(ModelConfig* c) const = 0;
  // The canonical tensors, in checkpoint order: the first stage's (embeddings), layer l's, and the
  // last stage's (final norm, the LM head when untied).
  virtual std::vector<TensorSpec> EmbeddingTensors(const ModelConfig& c) const = 0;
  virtual std::vector<TensorSpec> LayerTensors(const ModelConfig& c, int l) const = 0;
  virtual std::vector<TensorSpec> HeadTensors(const ModelConfig& c) const = 0;
  // The backend ops this family's model needs (beyond every family's common ones).
  virtual std::vector<Op> Ops() const = 0;
  // One line: the family and its shape.
  virtual std::string Describe(const ModelConfig& c) const = 0;

  // Hugging Face transformers' form of the family (ckpt/hf_folder.h): the model class's name in
  // config.json's "architectures"; each of its tensors as canonical tensors stacked by rows, then
  // transposed or not (GPT-2's Conv1D); config.json written for a config and read back (errors name
  // the file and the field, exit 2).
  struct HfTensor {
    std::string name;
    std::vector<std::string> parts;
    bool transpose = false;
  };
  virtual const char* HfArchitecture() const = 0;
  virtual std::vector<HfTensor> HfTensors(const ModelConfig& c) const = 0;
  virtual std::string HfConfig(const ModelConfig& c, const std::string& torch_dtype) const = 0;
  virtual Result<ModelConfig> FromHfConfig(const std::string& json_text, const std::string& file) const = 0;
};

// The registered families, "gpt2" first.
const std::vector<const ModelFamily*>& Families();
// The family named `name`, or an error listing the known ones.
Result<const ModelFamily*> FindFamily(const std::string& name);
// c.family's family (aborts on an unknown one: a ModelConfig is Finish()ed before use).
const ModelFamily& FamilyOf(const ModelConfig& c);
// The family whose HfArchitecture() is `architecture`, or an error listing the known ones.
Result<const ModelFamily*> FindHfFamily(const std::string& architecture);
// Every preset name of every family, comma separated (for help texts and errors).
std::string PresetList();
// The ops a model of c's family runs: every op but those only other families use.
std::vector<Op> OpsFor(const ModelConfig& c);
// The first op of OpsFor(c) the backend lacks in dtype t; nullopt when it has them all.
std::optional<Op> MissingOp(const ModelConfig& c, const Backend& b, DType t);

}  // namespace anneal
