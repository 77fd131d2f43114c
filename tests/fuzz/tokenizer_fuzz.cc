// The tokenizer on arbitrary bytes (`anneal prep` reads whatever the corpus holds): GPT-2's and
// cl100k_base's encodings. Properties: every id is in the vocabulary, and decoding the ids gives the
// input back, byte for byte (byte-level BPE loses nothing, invalid UTF-8 included).
#include <map>
#include <memory>

#include "data/tokenizer.h"
#include "fuzz/fuzz_target.h"

namespace {

const anneal::Tokenizer& Get(const char* name) {
  static std::map<std::string, std::unique_ptr<anneal::Tokenizer>> loaded;
  auto& t = loaded[name];
  if (!t) t = std::move(*anneal::Tokenizer::Load(name));
  return *t;
}

}  // namespace

ANNEAL_FUZZ_TARGET(tokenizer) {
  if (size == 0) return 0;
  const anneal::Tokenizer& tok = Get(data[0] % 2 ? "cl100k_base" : "gpt2");
  const std::string text = anneal::fuzz::Text(data + 1, size - 1);
  std::vector<uint32_t> ids;
  tok.NewEncoder()->Encode(text, &ids);
  for (uint32_t id : ids) FUZZ_EXPECT(id < tok.vocab_size());
  FUZZ_EXPECT(tok.Decode(ids) == text);
  return 0;
}
