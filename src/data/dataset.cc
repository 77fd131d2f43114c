#include "data/dataset.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "core/bounded_parse.h"
#include "core/checksum.h"

namespace anneal {

using nlohmann::json;

std::string DatasetInfo::ToJson() const {
  json j;
  j["format"] = kDatasetFormat;
  j["version"] = kDatasetVersion;
  j["tokenizer"] = tokenizer;
  j["vocab_size"] = vocab_size;
  j["eot"] = eot;
  j["token_bytes"] = token_bytes;
  j["inputs_hash"] = inputs_hash;
  j["val_fraction"] = val_fraction;
  j["unit_bytes"] = unit_bytes;
  j["created_by"] = created_by;
  json totals = json::object();
  for (const char* split : {"train", "val"}) {
    uint64_t d = 0;
    for (const auto& s : shards) d += s.split == split ? s.docs : 0;
    totals[split] = {{"tokens", Tokens(split)}, {"docs", d}};
  }
  j["totals"] = totals;
  json arr = json::array();
  for (const auto& s : shards) {
    json e{{"split", s.split}, {"file", s.file}, {"tokens", s.tokens}, {"docs", s.docs}};
    if (s.xxh64) e["xxh64"] = HexU64(*s.xxh64);
    arr.push_back(e);
  }
  j["shards"] = arr;
  return j.dump(2) + "\n";
}

uint64_t DatasetInfo::Tokens(const std::string& split) const {
  uint64_t t = 0;
  for (const auto& s : shards) t += s.split == split ? s.tokens : 0;
  return t;
}

namespace {

// A whole number in [0, max] (0 when absent and not required), or throws std::invalid_argument
// naming the field (FromJson catches it): get<uint64_t>() of 1e129 was undefined behaviour, of -1 a
// wrapped count.
uint64_t Whole(const json& o, const char* key, uint64_t max, bool required) {
  if (!o.is_object() || !o.contains(key)) {
    if (required) throw std::invalid_argument(std::string("\"") + key + "\" is missing");
    return 0;
  }
  int64_t v = 0;
  if (!JsonIntIn(o.at(key), 0, static_cast<int64_t>(std::min<uint64_t>(max, INT64_MAX)), &v)) {
    throw std::invalid_argument(std::string("\"") + key + "\" must be a whole number from 0 to " + std::to_string(max));
  }
  return static_cast<uint64_t>(v);
}

}  // namespace

Result<DatasetInfo> DatasetInfo::FromJson(const std::string& text, const std::string& where) {
  json j = json::parse(text, nullptr, false);
  auto bad = [&](const std::string& what) {
    return InvalidInput(where + ": " + what + "; re-create the dataset with anneal prep");
  };
  if (!j.is_object()) return bad("not a JSON object");
  const json format = j.value("format", json()), version = j.value("version", json());
  if (!format.is_string() || format.get<std::string>() != kDatasetFormat) return bad("field \"format\" is not \"anneal.dataset\"");
  if (!version.is_number_integer() || version.get<int64_t>() != kDatasetVersion) {
    return bad("field \"version\" is " + version.dump(-1, ' ', false, json::error_handler_t::replace).substr(0, 40) +
               ", this anneal reads version 1");
  }
  DatasetInfo d;
  d.has_manifest = true;
  try {
    d.tokenizer = j.at("tokenizer").get<std::string>();
    d.vocab_size = static_cast<uint32_t>(Whole(j, "vocab_size", UINT32_MAX, true));
    d.eot = static_cast<uint32_t>(Whole(j, "eot", UINT32_MAX, true));
    d.token_bytes = static_cast<uint32_t>(Whole(j, "token_bytes", UINT32_MAX, true));
    d.inputs_hash = j.value("inputs_hash", "");
    d.val_fraction = j.value("val_fraction", 0.0);
    d.unit_bytes = Whole(j, "unit_bytes", INT64_MAX, false);
    d.created_by = j.value("created_by", "");
    for (const auto& e : j.at("shards")) {
      ShardInfo s;
      s.split = e.at("split").get<std::string>();
      s.file = e.at("file").get<std::string>();
      s.tokens = Whole(e, "tokens", INT64_MAX, true);
      s.docs = Whole(e, "docs", INT64_MAX, false);
      if (e.contains("xxh64")) s.xxh64 = std::stoull(e.at("xxh64").get<std::string>(), nullptr, 16);
      if (s.file.find('/') != std::string::npos || s.file.empty() || s.file[0] == '.') {
        return bad("shard file name \"" + s.file + "\" must be a plain name in the dataset folder");
      }
      d.shards.push_back(std::move(s));
    }
  } catch (const std::exception& e) {
    return bad(std::string("missing or mistyped field (") + e.what() + ")");
  }
  if (d.token_bytes != 2 && d.token_bytes != 4) return bad("\"token_bytes\" must be 2 or 4");
  return d;
}

Result<DatasetInfo> LoadDataset(Env& env, const std::string& dir) {
  if (!env.IsDirectory(dir)) {
    return InvalidInput("dataset " + dir + " is not a folder: pass the --output folder of anneal prep, or a "
                        "folder of llm.c .bin shards");
  }
  std::string manifest = JoinPath(dir, kDatasetFile);
  if (env.Exists(manifest)) {
    ANNEAL_ASSIGN_OR_RETURN(std::string text, env.ReadFile(manifest));
    return DatasetInfo::FromJson(text, manifest);
  }
  DatasetInfo d;
  ANNEAL_ASSIGN_OR_RETURN(auto names, env.ListDir(dir));
  for (const auto& n : names) {
    if (n.size() < 4 || n.compare(n.size() - 4, 4, ".bin") != 0) continue;
    std::string split = n.find("val") != std::string::npos ? "val" : n.find("train") != std::string::npos ? "train" : "";
    if (split.empty()) continue;
    ShardInfo s;
    s.split = split;
    s.file = n;
    d.shards.push_back(std::move(s));
  }
  if (d.shards.empty()) {
    return InvalidInput("dataset " + dir + " has no dataset.json and no *train*.bin / *val*.bin shards: "
                        "prepare it with 'anneal prep --input TEXT --output " + dir + "'");
  }
  return d;
}

}  // namespace anneal
