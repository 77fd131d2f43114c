// Tokenizer::Load: a tokenizer by name — the embedded encodings (GPT-2's here; the tiktoken ones
// through LoadEmbeddedRanks, data/rank_files.cc) or a folder's encoder.json. In a file of its own so
// that a binary that never loads a tokenizer by name links none of the vocabularies.
#include "core/env.h"
#include "data/tokenizer.h"

// The embedded GPT-2 encoder.json (data/vocab_blobs.cc; path set by CMake).
extern "C" const char anneal_gpt2_encoder_json[];
extern "C" const char anneal_gpt2_encoder_json_end[];

namespace anneal {

Result<std::unique_ptr<Tokenizer>> Tokenizer::Load(const std::string& name) {
  if (name == "gpt2") {
    const std::string_view blob(anneal_gpt2_encoder_json,
                                static_cast<size_t>(anneal_gpt2_encoder_json_end - anneal_gpt2_encoder_json));
    return FromEncoderJson(blob, name);
  }
  if (name == "cl100k_base" || name == "o200k_base" || name == "llama3") return LoadEmbeddedRanks(name);
  std::string path = JoinPath(name, "encoder.json");
  auto text = Env::Default().ReadFile(path);
  if (!text.ok()) {
    return InvalidInput("unknown tokenizer '" + name +
                        "': use gpt2, cl100k_base, o200k_base or llama3, or a directory holding OpenAI's "
                        "encoder.json (" + text.status().message() + ")");
  }
  return FromEncoderJson(*text, name);
}

}  // namespace anneal
