#include "data/hf_tokenizer.h"

#include <algorithm>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/byte_level.h"
#include "data/pretokenize.h"

namespace anneal {

namespace {

// The merges in rank order ("left right"). GPT-2's vocabulary came from merges: each multi-byte
// token's bytes merged by the merges ranked below it (lowest rank first, leftmost on ties) end as
// exactly two tokens, its merge (OpenAI's vocab.bpe, exactly). A tiktoken vocabulary (cl100k, o200k,
// Llama 3) need not: its merges are every split of every token into two tokens, ordered by the
// token's rank, then the left part's, then the right's — as transformers converts tiktoken files —
// so that BPE with these merges gives tiktoken's ids.
std::vector<std::string> TiktokenMerges(const Tokenizer& tok) {
  std::vector<std::string> merges;
  for (uint32_t r = 0; r < tok.vocab_size(); ++r) {
    if (tok.IsSpecial(r)) continue;
    const std::string_view bytes = tok.TokenBytes(r);
    std::vector<std::pair<std::pair<uint32_t, uint32_t>, size_t>> splits;  // ((left id, right id), k)
    for (size_t k = 1; k < bytes.size(); ++k) {
      const uint32_t l = tok.Lookup(bytes.substr(0, k)), rr = tok.Lookup(bytes.substr(k));
      if (l != Tokenizer::kNoToken && rr != Tokenizer::kNoToken) splits.push_back({{l, rr}, k});
    }
    std::sort(splits.begin(), splits.end());
    for (const auto& [ids, k] : splits) merges.push_back(ByteLevelText(bytes.substr(0, k)) + " " + ByteLevelText(bytes.substr(k)));
  }
  return merges;
}

Result<std::vector<std::string>> Gpt2Merges(const Tokenizer& tok) {
  std::vector<std::string> merges;
  for (uint32_t r = 0; r < tok.vocab_size(); ++r) {
    if (tok.IsSpecial(r)) continue;
    const std::string bytes(tok.TokenBytes(r));
    if (bytes.size() < 2) continue;
    std::vector<std::string> parts;
    for (char c : bytes) parts.emplace_back(1, c);
    for (;;) {
      size_t best = parts.size();
      uint32_t best_rank = r;
      for (size_t i = 0; i + 1 < parts.size(); ++i) {
        const uint32_t id = tok.Lookup(parts[i] + parts[i + 1]);
        if (id < best_rank) best_rank = id, best = i;  // kNoToken is never below r
      }
      if (best == parts.size()) break;
      parts[best] += parts[best + 1];
      parts.erase(parts.begin() + static_cast<long>(best) + 1);
    }
    if (parts.size() != 2) {
      return InvalidInput("token " + std::to_string(r) + " of tokenizer '" + tok.name() +
                          "' is not one merge of two lower-ranked tokens (" + std::to_string(parts.size()) +
                          " parts): it cannot be written as BPE merges; export with --tokenizer none");
    }
    merges.push_back(ByteLevelText(parts[0]) + " " + ByteLevelText(parts[1]));
  }
  return merges;
}

Result<std::vector<std::string>> MergesOf(const Tokenizer& tok) {
  if (tok.rule() == PreTokenizer::kGpt2) return Gpt2Merges(tok);
  return TiktokenMerges(tok);
}

// token -> id in id order. Appended to the ordered map's vector directly: its operator[] searches the
// keys linearly (quadratic over a vocabulary); the keys are distinct tokens.
nlohmann::ordered_json VocabOf(const Tokenizer& tok) {
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  auto& entries = static_cast<std::vector<std::pair<const std::string, nlohmann::ordered_json>>&>(
      vocab.get_ref<nlohmann::ordered_json::object_t&>());
  entries.reserve(tok.vocab_size());
  for (uint32_t id = 0; id < tok.vocab_size(); ++id) {
    if (tok.IsSpecial(id)) {
      entries.emplace_back(std::string(tok.TokenBytes(id)), id);
    } else if (!tok.TokenBytes(id).empty()) {
      entries.emplace_back(ByteLevelText(tok.TokenBytes(id)), id);
    }
  }
  return vocab;
}

// tokenizer.json's pre-tokenizer and post-processor (the decoder is byte-level). GPT-2: byte-level
// pre-tokenization with GPT-2's pattern. The others: a Split on the encoding's pattern, then
// byte-level without its own regex (how transformers writes Llama 3's and the tiktoken encodings).
// Llama 3's post-processor puts <|begin_of_text|> first, as prep does before each document (and as
// Meta's tokenizer.json does); the others add nothing.
void PreAndPost(const Tokenizer& tok, const nlohmann::ordered_json& byte_level, nlohmann::ordered_json* pre,
                nlohmann::ordered_json* post) {
  *pre = byte_level;
  if (tok.rule() != PreTokenizer::kGpt2) {
    *pre = {{"type", "Sequence"},
            {"pretokenizers",
             {{{"type", "Split"}, {"pattern", {{"Regex", std::string(PatternOf(tok.rule()))}}}, {"behavior", "Isolated"},
               {"invert", false}},
              byte_level}}};
  }
  *post = byte_level;
  if (tok.bos() == tok.eos()) return;
  const std::string bos(tok.TokenBytes(tok.bos()));
  *post = {{"type", "TemplateProcessing"},
           {"single", {{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
           {"pair",
            {{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}},
             {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
             {{"SpecialToken", {{"id", bos}, {"type_id", 1}}}},
             {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
           {"special_tokens", {{bos, {{"id", bos}, {"ids", {tok.bos()}}, {"tokens", {bos}}}}}}};
}

// tokenizer.json: the vocabulary and merges for the tokenizers library (fast tokenizers, Tokenizers.js).
std::string FastTokenizerJson(const Tokenizer& tok, const nlohmann::ordered_json& vocab,
                              const std::vector<std::string>& merge_list) {
  const bool gpt2 = tok.rule() == PreTokenizer::kGpt2;
  const nlohmann::ordered_json byte_level = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", gpt2}};
  nlohmann::ordered_json pre, post;
  PreAndPost(tok, byte_level, &pre, &post);
  nlohmann::ordered_json added = nlohmann::ordered_json::array();
  for (const auto& [text, id] : tok.SpecialTokens()) {
    added.push_back({{"id", id}, {"content", text}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                     {"normalized", gpt2}, {"special", true}});
  }
  nlohmann::ordered_json fast = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", pre},
      {"post_processor", post},
      {"decoder", byte_level},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""}, {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", !gpt2},
        {"vocab", vocab}, {"merges", merge_list}}}};
  return fast.dump() + "\n";
}

}  // namespace

Result<std::vector<std::pair<std::string, std::string>>> HfTokenizerFiles(const Tokenizer& tok, int max_length) {
  const bool gpt2 = tok.rule() == PreTokenizer::kGpt2;
  const nlohmann::ordered_json vocab = VocabOf(tok);
  ANNEAL_ASSIGN_OR_RETURN(std::vector<std::string> merge_list, MergesOf(tok));
  const std::string bos(tok.TokenBytes(tok.bos())), eos(tok.TokenBytes(tok.eos()));
  nlohmann::ordered_json config = {{"tokenizer_class", gpt2 ? "GPT2TokenizerFast" : "PreTrainedTokenizerFast"},
                                   {"model_max_length", max_length}};
  if (gpt2) config["add_prefix_space"] = false;
  config["bos_token"] = bos;
  config["eos_token"] = eos;
  if (gpt2) config["unk_token"] = eos;
  config["clean_up_tokenization_spaces"] = false;
  nlohmann::ordered_json special = {{"bos_token", bos}, {"eos_token", eos}};
  if (gpt2) special["unk_token"] = eos;
  std::vector<std::pair<std::string, std::string>> files = {{"tokenizer.json", FastTokenizerJson(tok, vocab, merge_list)},
                                                            {"tokenizer_config.json", config.dump(2) + "\n"},
                                                            {"special_tokens_map.json", special.dump(2) + "\n"}};
  if (gpt2) {  // the slow GPT2Tokenizer's files too
    std::string merges = "#version: 0.2\n";
    for (const std::string& m : merge_list) merges += m + "\n";
    files.insert(files.begin(), {"vocab.json", vocab.dump() + "\n"});
    files.insert(files.begin() + 2, {"merges.txt", merges});
  }
  return files;
}

}  // namespace anneal
