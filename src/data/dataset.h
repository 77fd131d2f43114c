// dataset.json: the description prep writes beside its shards (docs/formats/dataset.md), and how a
// loader finds a split's shards in a folder — with dataset.json, or a plain llm.c folder without it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"

namespace anneal {

inline constexpr const char* kDatasetFile = "dataset.json";
inline constexpr const char* kDatasetFormat = "anneal.dataset";
inline constexpr int kDatasetVersion = 1;

struct ShardInfo {
  std::string split;  // "train" or "val"
  std::string file;   // name relative to the dataset folder
  uint64_t tokens = 0;
  uint64_t docs = 0;
  std::optional<uint64_t> xxh64;  // of the whole file; absent for plain llm.c folders
};

struct DatasetInfo {
  std::string tokenizer;  // "gpt2"; empty when unknown (plain llm.c folder)
  uint32_t vocab_size = 0;  // 0 when unknown
  uint32_t eot = 0;
  uint32_t token_bytes = 2;
  std::string inputs_hash;
  double val_fraction = 0;
  uint64_t unit_bytes = 0;
  std::string created_by;
  std::vector<ShardInfo> shards;
  bool has_manifest = false;  // false: a plain llm.c folder read by file names and sizes

  std::string ToJson() const;
  // Parses dataset.json text; errors name `where` and the field.
  static Result<DatasetInfo> FromJson(const std::string& text, const std::string& where);
  uint64_t Tokens(const std::string& split) const;
};

// Reads dir/dataset.json, or, when absent, lists llm.c shards by name (*train*.bin / *val*.bin,
// sorted; sizes and headers are checked when the shards are opened).
Result<DatasetInfo> LoadDataset(Env& env, const std::string& dir);

}  // namespace anneal
