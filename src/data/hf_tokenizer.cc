#include "data/hf_tokenizer.h"

#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>


namespace anneal {

namespace {

// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the others for 256, 257, ...
const std::vector<uint32_t>& ByteAlphabet() {
  static const std::vector<uint32_t> table = [] {
    std::vector<uint32_t> t(256, 0);
    std::vector<bool> direct(256, false);
    for (int b = '!'; b <= '~'; ++b) direct[b] = true;
    for (int b = 0xA1; b <= 0xAC; ++b) direct[b] = true;
    for (int b = 0xAE; b <= 0xFF; ++b) direct[b] = true;
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) t[b] = direct[b] ? static_cast<uint32_t>(b) : next++;
    return t;
  }();
  return table;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace

std::string ByteLevelText(std::string_view bytes) {
  std::string out;
  for (unsigned char b : bytes) AppendUtf8(ByteAlphabet()[b], &out);
  return out;
}

Result<std::vector<std::pair<std::string, std::string>>> HfTokenizerFiles(const Tokenizer& tok, int max_length) {
  const uint32_t V = tok.vocab_size(), eot = tok.eos();
  std::unordered_map<std::string, uint32_t> id_of;
  id_of.reserve(V * 2);
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  for (uint32_t id = 0; id < V; ++id) {
    const std::string bytes(tok.TokenBytes(id));
    if (id != eot) id_of.emplace(bytes, id);
    vocab[id == eot ? std::string("<|endoftext|>") : ByteLevelText(bytes)] = id;
  }
  // Each multi-byte token's merge: its bytes merged by the merges ranked below it (lowest rank
  // first, leftmost on ties) end as exactly two tokens.
  std::string merges = "#version: 0.2\n";
  std::vector<std::pair<uint32_t, std::string>> ordered;  // (rank, line)
  for (uint32_t r = 0; r < V; ++r) {
    if (r == eot) continue;
    const std::string bytes(tok.TokenBytes(r));
    if (bytes.size() < 2) continue;
    std::vector<std::string> parts;
    for (char c : bytes) parts.emplace_back(1, c);
    for (;;) {
      size_t best = parts.size();
      uint32_t best_rank = r;
      for (size_t i = 0; i + 1 < parts.size(); ++i) {
        auto it = id_of.find(parts[i] + parts[i + 1]);
        if (it != id_of.end() && it->second < best_rank) best_rank = it->second, best = i;
      }
      if (best == parts.size()) break;
      parts[best] += parts[best + 1];
      parts.erase(parts.begin() + static_cast<long>(best) + 1);
    }
    if (parts.size() != 2) {
      return InvalidInput("token " + std::to_string(r) + " of tokenizer '" + tok.name() +
                          "' is not one merge of two lower-ranked tokens (" + std::to_string(parts.size()) +
                          " parts): it cannot be written as merges.txt; export with --tokenizer none");
    }
    ordered.push_back({r, ByteLevelText(parts[0]) + " " + ByteLevelText(parts[1]) + "\n"});
  }
  nlohmann::ordered_json merge_list = nlohmann::ordered_json::array();
  for (const auto& [r, line] : ordered) {
    merges += line;
    merge_list.push_back(line.substr(0, line.size() - 1));
  }
  const std::string eot_text = "<|endoftext|>";
  nlohmann::ordered_json config = {{"tokenizer_class", "GPT2TokenizerFast"},
                                   {"model_max_length", max_length},
                                   {"add_prefix_space", false},
                                   {"bos_token", eot_text},
                                   {"eos_token", eot_text},
                                   {"unk_token", eot_text},
                                   {"clean_up_tokenization_spaces", false}};
  nlohmann::ordered_json special = {{"bos_token", eot_text}, {"eos_token", eot_text}, {"unk_token", eot_text}};
  // tokenizer.json: the same vocabulary and merges for the tokenizers library (fast tokenizers,
  // Tokenizers.js): byte-level pre-tokenization with GPT-2's pattern, BPE, byte-level decoding.
  const nlohmann::ordered_json byte_level = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  nlohmann::ordered_json fast = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens",
       {{{"id", eot}, {"content", eot_text}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
         {"normalized", true}, {"special", true}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer", byte_level},
      {"post_processor", byte_level},
      {"decoder", byte_level},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""}, {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", false},
        {"vocab", vocab}, {"merges", merge_list}}}};
  return std::vector<std::pair<std::string, std::string>>{{"vocab.json", vocab.dump() + "\n"},
                                                         {"tokenizer.json", fast.dump() + "\n"},
                                                         {"merges.txt", merges},
                                                         {"tokenizer_config.json", config.dump(2) + "\n"},
                                                         {"special_tokens_map.json", special.dump(2) + "\n"}};
}

}  // namespace anneal
