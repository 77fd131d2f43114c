// A byte-level BPE vocabulary as Hugging Face tokenizer files, so AutoTokenizer loads the tokenizer
// an exported model was trained with: tokenizer.json (the tokenizers library: fast tokenizers,
// Tokenizers.js — the encoding's pre-tokenizer, BPE with its merges, the special tokens),
// tokenizer_config.json and special_tokens_map.json, and for GPT-2's rules also vocab.json (token ->
// id, bytes in GPT-2's byte-to-unicode alphabet) and merges.txt (the merges in rank order, each the
// pair whose concatenation is the next id: found by merging the token's bytes with the lower-ranked
// merges only, tiktoken's rule). A tiktoken vocabulary's merges are every split of every token into
// two tokens, as transformers converts tiktoken files (docs/formats/hf.md).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "data/byte_level.h"
#include "data/tokenizer.h"

namespace anneal {

// The files (name, text), made before anything is written; max_length is the model's context
// (tokenizer_config.json's model_max_length). A GPT-2-rules vocabulary with a token that is not one
// merge of two lower-ranked tokens cannot be written as merges.txt (exit 2).
Result<std::vector<std::pair<std::string, std::string>>> HfTokenizerFiles(const Tokenizer& tok, int max_length);

}  // namespace anneal
