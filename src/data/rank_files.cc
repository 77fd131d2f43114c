// The tiktoken encodings embedded in the full build: cl100k_base and o200k_base from npm tiktoken's
// encoders/NAME.json, Llama 3's from llama3-tokenizer-js's vocabulary (data/rank_blobs.cc embeds them;
// docs/formats/tokenizer.md). The slim build has data/rank_files_unavailable.cc instead.
#include <nlohmann/json.hpp>

#include "core/crypto.h"
#include "data/byte_level.h"
#include "data/pretokenize.h"
#include "data/tokenizer.h"

// The embedded rank files (data/rank_blobs.cc; paths set by CMake).
#define ANNEAL_BLOB(sym)                \
  extern "C" const char anneal_##sym[]; \
  extern "C" const char anneal_##sym##_end[];
ANNEAL_BLOB(cl100k_base_json)
ANNEAL_BLOB(o200k_base_json)
ANNEAL_BLOB(llama3_vocab_js)
#undef ANNEAL_BLOB

namespace anneal {

namespace {

std::string_view Blob(const char* begin, const char* end) {
  return std::string_view(begin, static_cast<size_t>(end - begin));
}

// Llama 3's 256 special tokens, from id 128,000 (Meta's Llama 3.1 list, as llama3-tokenizer-js has it).
std::vector<std::pair<std::string, uint32_t>> Llama3Specials(uint32_t first) {
  std::vector<std::string> names = {"<|begin_of_text|>",           "<|end_of_text|>",
                                    "<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
                                    "<|finetune_right_pad_id|>",    "<|reserved_special_token_2|>",
                                    "<|start_header_id|>",          "<|end_header_id|>",
                                    "<|eom_id|>",                   "<|eot_id|>",
                                    "<|python_tag|>"};
  for (int i = 3; i <= 247; ++i) names.push_back("<|reserved_special_token_" + std::to_string(i) + "|>");
  std::vector<std::pair<std::string, uint32_t>> out;
  for (size_t i = 0; i < names.size(); ++i) out.emplace_back(names[i], first + static_cast<uint32_t>(i));
  return out;
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::LoadEmbeddedRanks(const std::string& name) {
  if (name == "cl100k_base") {
    return FromTiktokenJson(Blob(anneal_cl100k_base_json, anneal_cl100k_base_json_end), name, PreTokenizer::kCl100k);
  }
  if (name == "o200k_base") {
    return FromTiktokenJson(Blob(anneal_o200k_base_json, anneal_o200k_base_json_end), name, PreTokenizer::kO200k);
  }
  if (name == "llama3") return FromLlama3Data(Blob(anneal_llama3_vocab_js, anneal_llama3_vocab_js_end), name);
  return InvalidInput("tokenizer '" + name + "' is not an embedded tiktoken encoding");
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromTiktokenJson(std::string_view json, std::string name,
                                                               PreTokenizer rule) {
  auto bad = [&](const std::string& what) {
    return InvalidInput("tokenizer '" + name + "': " + what + " (expected npm tiktoken's encoders/" + name +
                        ".json, embedded at build time: reinstall it with scripts/setup.sh, then rebuild)");
  };
  nlohmann::json spec = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!spec.is_object() || !spec.contains("pat_str") || !spec["pat_str"].is_string() ||
      !spec.contains("bpe_ranks") || !spec["bpe_ranks"].is_string() || !spec.contains("special_tokens") ||
      !spec["special_tokens"].is_object()) {
    return bad("not a JSON object with pat_str, special_tokens and bpe_ranks");
  }
  if (rule == PreTokenizer::kGpt2 || spec["pat_str"].get<std::string>() != PatternOf(rule)) {
    return bad("its pattern is not the one anneal's pre-tokenizer implements");
  }
  // bpe_ranks: lines "PREFIX OFFSET TOKEN TOKEN ..." of base64 tokens ranked OFFSET, OFFSET + 1, ...
  std::vector<std::string> token_bytes;
  const std::string& ranks = spec["bpe_ranks"].get_ref<const std::string&>();
  for (std::string_view rest = ranks; !rest.empty();) {
    size_t eol = rest.find('\n');
    std::string_view line = rest.substr(0, eol);
    rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 1);
    if (line.empty()) continue;
    std::vector<std::string_view> fields;
    for (size_t p = 0; p <= line.size();) {
      size_t q = line.find(' ', p);
      if (q == std::string_view::npos) q = line.size();
      fields.push_back(line.substr(p, q - p));
      p = q + 1;
    }
    uint64_t offset = 0;
    if (fields.size() < 2 || fields[1].empty() || fields[1].size() > 9 ||
        fields[1].find_first_not_of("0123456789") != std::string_view::npos) {
      return bad("a bpe_ranks line's rank offset is not a number below 16,777,216");
    }
    offset = std::stoull(std::string(fields[1]));
    if (offset + fields.size() - 2 > (1u << 24)) return bad("ranks above 16,777,216");
    if (token_bytes.size() < offset + fields.size() - 2) token_bytes.resize(offset + fields.size() - 2);
    for (size_t f = 2; f < fields.size(); ++f) {
      bool ok = false;
      std::string bytes = Base64Decode(fields[f], &ok);
      if (!ok || bytes.empty()) return bad("token '" + std::string(fields[f]) + "' is not base64");
      if (!token_bytes[offset + f - 2].empty()) return bad("rank " + std::to_string(offset + f - 2) + " is given twice");
      token_bytes[offset + f - 2] = std::move(bytes);
    }
  }
  std::vector<std::pair<std::string, uint32_t>> specials;
  for (const auto& [text, id] : spec["special_tokens"].items()) {
    if (!id.is_number_unsigned() || id.get<uint64_t>() >= (1u << 24)) return bad("special token " + text + " has no id");
    specials.emplace_back(text, id.get<uint32_t>());
  }
  return Build(std::move(name), rule, std::move(token_bytes), specials, "<|endoftext|>", "<|endoftext|>");
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromLlama3Data(std::string_view js, std::string name) {
  auto bad = [&](const std::string& what) {
    return InvalidInput("tokenizer '" + name + "': " + what +
                        " (expected llama3-tokenizer-js's src/data-converted.js, embedded at build time: reinstall it "
                        "with scripts/setup.sh, then rebuild)");
  };
  constexpr std::string_view kStart = "llama_vocab_base64 = \"";
  size_t a = js.find(kStart);
  if (a == std::string_view::npos) return bad("no llama_vocab_base64");
  a += kStart.size();
  size_t b = js.find('"', a);
  if (b == std::string_view::npos) return bad("llama_vocab_base64 does not end");
  bool ok = false;
  const std::string vocab = Base64Decode(js.substr(a, b - a), &ok);
  if (!ok) return bad("llama_vocab_base64 is not base64");
  std::vector<std::string> token_bytes;
  for (std::string_view rest = vocab;;) {
    size_t eol = rest.find('\n');
    std::string bytes;
    if (!ByteLevelBytes(rest.substr(0, eol), &bytes) || bytes.empty()) {
      return bad("token " + std::to_string(token_bytes.size()) + " is not byte-level BPE text");
    }
    token_bytes.push_back(std::move(bytes));
    if (eol == std::string_view::npos) break;
    rest = rest.substr(eol + 1);
  }
  constexpr uint32_t kLlama3Ordinary = 128000;
  if (token_bytes.size() != kLlama3Ordinary) {
    return bad("the vocabulary has " + std::to_string(token_bytes.size()) + " tokens, not 128,000");
  }
  return Build(std::move(name), PreTokenizer::kCl100k, std::move(token_bytes), Llama3Specials(kLlama3Ordinary),
               "<|begin_of_text|>", "<|end_of_text|>");
}

}  // namespace anneal
