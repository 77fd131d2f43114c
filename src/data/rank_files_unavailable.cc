// The slim build (cmake/slim.cmake) embeds GPT-2's vocabulary only: the tiktoken encodings are not
// in it (data/rank_files.cc is the full build's).
#include "data/tokenizer.h"

namespace anneal {

namespace {
Status NotInThisBuild(const std::string& name) {
  return InvalidInput("tokenizer '" + name + "' is not in the slim build, which embeds GPT-2's vocabulary only: "
                      "tokenize and prep with the full build (the shards it writes train here)");
}
}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::LoadEmbeddedRanks(const std::string& name) { return NotInThisBuild(name); }

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromTiktokenJson(std::string_view, std::string name, PreTokenizer) {
  return NotInThisBuild(name);
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromLlama3Data(std::string_view, std::string name) {
  return NotInThisBuild(name);
}

}  // namespace anneal
