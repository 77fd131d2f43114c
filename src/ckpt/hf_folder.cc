#include "ckpt/hf_folder.h"

#include "core/memory.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "core/env.h"
#include "core/safetensors.h"
#include "data/hf_tokenizer.h"
#include "data/tokenizer.h"
#include "model/family.h"
#include "tensor/dtype.h"

namespace anneal {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

struct DtypeInfo {
  const char* st;     // safetensors' name
  const char* torch;  // config.json's torch_dtype
  size_t bytes;
};
Result<DtypeInfo> DtypeOf(const std::string& name) {
  if (name == "f32") return DtypeInfo{"F32", "float32", 4};
  if (name == "bf16") return DtypeInfo{"BF16", "bfloat16", 2};
  if (name == "f16") return DtypeInfo{"F16", "float16", 2};
  return InvalidInput("--dtype '" + name + "' must be f32, bf16 or f16");
}

std::string Encode(const std::vector<float>& v, const std::string& st) {
  std::string out;
  if (st == "F32") {
    out.resize(v.size() * 4);
    std::memcpy(out.data(), v.data(), out.size());
  } else {
    out.resize(v.size() * 2);
    for (size_t i = 0; i < v.size(); ++i) {
      const uint16_t h = st == "BF16" ? FloatToBf16(v[i]) : FloatToF16(v[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

// One HF tensor's canonical parts and its shape: the parts' rows stacked (1-D parts concatenated),
// transposed when asked.
struct Assembly {
  std::vector<const ParamInfo*> parts;
  std::vector<int64_t> stacked;  // before the transpose
  std::vector<int64_t> shape;    // as stored
};
Result<Assembly> AssemblyOf(const ModelFamily::HfTensor& t, const ParamLayout& layout) {
  Assembly a;
  for (const std::string& n : t.parts) {
    const ParamInfo* p = layout.Find(n);
    if (!p) return Internal("HF tensor " + t.name + " names the unknown canonical tensor " + n);
    if (!a.parts.empty() && p->shape.size() != a.parts[0]->shape.size()) return Internal("mixed ranks in " + t.name);
    a.parts.push_back(p);
    if (a.stacked.empty()) a.stacked = p->shape;
    else a.stacked[0] += p->shape[0];
  }
  a.shape = a.stacked;
  if (t.transpose && a.shape.size() == 2) std::swap(a.shape[0], a.shape[1]);
  return a;
}

// The HF tensor's values (row-major in its stored shape) from the canonical parameters.
std::vector<float> Gather(const Assembly& a, bool transpose, const std::vector<float>& params) {
  std::vector<float> stacked;
  for (const ParamInfo* p : a.parts) stacked.insert(stacked.end(), params.begin() + p->offset, params.begin() + p->offset + p->size);
  if (!transpose || a.stacked.size() != 2) return stacked;
  const int64_t R = a.stacked[0], C = a.stacked[1];
  std::vector<float> t(stacked.size());
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t c = 0; c < C; ++c) t[c * R + r] = stacked[r * C + c];
  }
  return t;
}

// The reverse: values in the stored shape scattered into the canonical parameters.
void Scatter(const Assembly& a, bool transpose, const std::vector<float>& values, std::vector<float>* params) {
  std::vector<float> stacked = values;
  if (transpose && a.stacked.size() == 2) {
    const int64_t R = a.stacked[0], C = a.stacked[1];
    for (int64_t r = 0; r < R; ++r) {
      for (int64_t c = 0; c < C; ++c) stacked[r * C + c] = values[c * R + r];
    }
  }
  size_t at = 0;
  for (const ParamInfo* p : a.parts) {
    std::copy(stacked.begin() + at, stacked.begin() + at + p->size, params->begin() + p->offset);
    at += p->size;
  }
}

Status WriteText(const std::string& path, const std::string& text) {
  return Env::Default().WriteFileAtomic(path, text);
}

Result<std::string> ReadText(const std::string& path) { return Env::Default().ReadFile(path); }

}  // namespace

Result<uint64_t> ParseShardSize(const std::string& text) { return ParseByteSize(text, "--max-shard-size"); }

Status ExportHfFolder(const ModelConfig& c, const std::vector<float>& params, const std::string& out_dir,
                      const HfExportOptions& o) {
  ANNEAL_ASSIGN_OR_RETURN(DtypeInfo dt, DtypeOf(o.dtype));
  if (o.tokenizer && o.tokenizer->vocab_size() != static_cast<uint32_t>(c.vocab_size)) {
    return InvalidInput("tokenizer '" + o.tokenizer->name() + "' has " + std::to_string(o.tokenizer->vocab_size()) +
                        " tokens but the model's vocabulary has " + std::to_string(c.vocab_size) +
                        ": give the tokenizer the model was trained with, or none");
  }
  std::vector<std::pair<std::string, std::string>> tokenizer_files;  // made before anything is written
  if (o.tokenizer) {
    ANNEAL_ASSIGN_OR_RETURN(tokenizer_files, HfTokenizerFiles(*o.tokenizer, c.max_seq_len));
  }
  std::error_code ec;
  if (fs::exists(out_dir, ec) && !fs::is_empty(out_dir, ec)) {
    return InvalidInput(out_dir + " exists and is not empty: export into a new folder (nothing was written)");
  }
  fs::create_directories(out_dir, ec);
  if (ec) return InvalidInput("cannot create " + out_dir + ": " + ec.message());
  const ModelFamily& fam = FamilyOf(c);
  const ParamLayout layout(c);
  if (params.size() != layout.total_floats()) return Internal("export: parameters of the wrong size");
  // Tensors in the family's order, cut into shards before a tensor that would pass the limit.
  std::vector<SafeTensorsWriter> shards(1);
  std::vector<std::vector<std::string>> names(1);
  uint64_t in_shard = 0, total = 0;
  for (const ModelFamily::HfTensor& t : fam.HfTensors(c)) {
    ANNEAL_ASSIGN_OR_RETURN(Assembly a, AssemblyOf(t, layout));
    std::string bytes = Encode(Gather(a, t.transpose, params), dt.st);
    if (in_shard > 0 && in_shard + bytes.size() > o.max_shard_bytes) {
      shards.emplace_back();
      names.emplace_back();
      in_shard = 0;
    }
    in_shard += bytes.size();
    total += bytes.size();
    names.back().push_back(t.name);
    shards.back().AddBytes(t.name, dt.st, a.shape, std::move(bytes));
  }
  const size_t n = shards.size();
  json weight_map = json::object();
  for (size_t i = 0; i < n; ++i) {
    char file[64];
    if (n == 1) std::snprintf(file, sizeof file, "model.safetensors");
    else std::snprintf(file, sizeof file, "model-%05zu-of-%05zu.safetensors", i + 1, n);
    shards[i].SetMetadata("format", "pt");
    ANNEAL_RETURN_IF_ERROR(shards[i].Write(Env::Default(), out_dir + "/" + file));
    for (const std::string& t : names[i]) weight_map[t] = file;
  }
  if (n > 1) {
    const json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    ANNEAL_RETURN_IF_ERROR(WriteText(out_dir + "/model.safetensors.index.json", index.dump(2) + "\n"));
  }
  for (const auto& [name, text] : tokenizer_files) ANNEAL_RETURN_IF_ERROR(WriteText(out_dir + "/" + name, text));
  std::string config = fam.HfConfig(c, dt.torch);
  if (o.tokenizer) {  // the ids of the tokenizer the model was trained with
    nlohmann::ordered_json oj = nlohmann::ordered_json::parse(config);
    oj["bos_token_id"] = o.tokenizer->bos();
    oj["eos_token_id"] = o.tokenizer->eos();
    config = oj.dump(2) + "\n";
  }
  const json cj = json::parse(config);
  nlohmann::ordered_json gen = {{"_from_model_config", true},
                                {"bos_token_id", cj.value("bos_token_id", json())},
                                {"eos_token_id", cj.value("eos_token_id", json())}};
  ANNEAL_RETURN_IF_ERROR(WriteText(out_dir + "/generation_config.json", gen.dump(2) + "\n"));
  // config.json last: a folder an export did not finish has none, and from_pretrained refuses it.
  return WriteText(out_dir + "/config.json", config);
}

Result<ModelConfig> ReadHfConfig(const std::string& dir) {
  const std::string config_path = dir + "/config.json";
  auto text = ReadText(config_path);
  if (!text.ok()) return InvalidInput("no config.json in " + dir + ": a Hugging Face model folder has one");
  json cj = json::parse(*text, nullptr, false);
  if (cj.is_discarded() || !cj.is_object()) return InvalidInput(config_path + " is not a JSON object");
  const json arch = cj.value("architectures", json());
  if (!arch.is_array() || arch.empty() || !arch[0].is_string()) {
    return InvalidInput(config_path + ": \"architectures\" must name the model class (GPT2LMHeadModel, LlamaForCausalLM)");
  }
  ANNEAL_ASSIGN_OR_RETURN(const ModelFamily* fam, FindHfFamily(arch[0].get<std::string>()));
  return fam->FromHfConfig(*text, config_path);
}

namespace {

std::string ShapeText(const std::vector<int64_t>& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
  return o + "]";
}

bool EndsWith(const std::string& name, const char* s) {
  return name.size() >= std::strlen(s) && name.compare(name.size() - std::strlen(s), std::string::npos, s) == 0;
}

// A Hugging Face model folder's weights: which file holds each tensor (the index, or the one file),
// each file opened once.
class HfWeights {
 public:
  explicit HfWeights(std::string dir) : dir_(std::move(dir)) {}

  // A tensor the model needs, found and checked.
  struct Found {
    const ModelFamily::HfTensor* spec;
    std::string name;
    SafeTensorsReader* reader;
    Assembly a;
  };

  Status Index() {
    auto index_text = ReadText(dir_ + "/model.safetensors.index.json");
    if (index_text.ok()) {
      json idx = json::parse(*index_text, nullptr, false);
      if (idx.is_discarded() || !idx.contains("weight_map") || !idx.at("weight_map").is_object()) {
        return InvalidInput(dir_ + "/model.safetensors.index.json has no \"weight_map\" object");
      }
      for (const auto& [k, v] : idx.at("weight_map").items()) {
        if (!v.is_string()) return InvalidInput(dir_ + "/model.safetensors.index.json: the file of " + k + " is not a name");
        where_[k] = v.get<std::string>();
      }
    }
    if (!where_.empty()) return Status::Ok();
    if (!fs::exists(dir_ + "/model.safetensors")) {  // one file: every tensor in it
      return InvalidInput("no model.safetensors or model.safetensors.index.json in " + dir_ +
                          " (anneal reads safetensors weights, not pytorch_model.bin)");
    }
    ANNEAL_ASSIGN_OR_RETURN(SafeTensorsReader * r, Reader("model.safetensors"));
    for (const auto& [k, e] : r->tensors()) where_[k] = "model.safetensors";
    return Status::Ok();
  }

  // Tensor t found and checked (name, shape, dtype) before the model's memory is allocated: a
  // config.json describing another (or an absurd) model fails here, naming a tensor.
  Result<Found> Find(const ModelFamily::HfTensor& t, const ParamLayout& layout) {
    std::string name = t.name;
    // GPT-2 folders made by GPT2Model (OpenAI's own) lack the "transformer." prefix.
    if (!where_.count(name) && name.rfind("transformer.", 0) == 0 && where_.count(name.substr(12))) name = name.substr(12);
    if (!where_.count(name)) return InvalidInput("tensor " + t.name + " is missing from " + dir_);
    ANNEAL_ASSIGN_OR_RETURN(SafeTensorsReader * r, Reader(where_[name]));
    if (!r->Has(name)) return InvalidInput("tensor " + name + " is not in " + dir_ + "/" + where_[name] + " as its index says");
    used_.insert(name);
    const TensorEntry& e = r->tensors().at(name);
    ANNEAL_ASSIGN_OR_RETURN(Assembly a, AssemblyOf(t, layout));
    if (e.shape != a.shape) {
      return InvalidInput("tensor " + name + " in " + where_[name] + " has shape " + ShapeText(e.shape) +
                          ", config.json's model needs " + ShapeText(a.shape));
    }
    if (e.dtype != "F32" && e.dtype != "BF16" && e.dtype != "F16") {
      return InvalidInput("tensor " + name + " in " + where_[name] + " is " + e.dtype + ": anneal reads F32, BF16 and F16");
    }
    return Found{&t, name, r, a};
  }

  // Every tensor not used must be one anneal knows to skip: a tied head's copy, attention masks, caches.
  Status CheckTheRest(const HfModel& m, const ModelFamily& fam) const {
    for (const auto& [name, file] : where_) {
      if (used_.count(name)) continue;
      const bool tied_head = name == "lm_head.weight" && m.config.tie_embeddings;
      if (tied_head || EndsWith(name, ".attn.bias") || EndsWith(name, ".attn.masked_bias") ||
          EndsWith(name, "rotary_emb.inv_freq")) {
        continue;
      }
      return InvalidInput("tensor " + name + " in " + dir_ + "/" + file + " is not part of a " + fam.HfArchitecture() +
                          " anneal knows (a field config.json does not describe?)");
    }
    return Status::Ok();
  }

 private:
  Result<SafeTensorsReader*> Reader(const std::string& file) {
    if (auto it = readers_.find(file); it != readers_.end()) return it->second.get();
    if (file.find('/') != std::string::npos) return InvalidInput("shard name " + file + " in the index has a slash");
    auto r = SafeTensorsReader::Open(Env::Default(), dir_ + "/" + file);
    if (!r.ok()) {
      return InvalidInput((fs::exists(dir_ + "/" + file) ? "" : "missing shard: ") + r.status().message());
    }
    return (readers_[file] = std::move(r).value()).get();
  }

  const std::string dir_;
  std::map<std::string, std::string> where_;
  std::set<std::string> used_;
  std::map<std::string, std::unique_ptr<SafeTensorsReader>> readers_;
};

// A found tensor's values as floats (from F32, BF16 or F16).
Result<std::vector<float>> ValuesOf(const HfWeights::Found& f) {
  const TensorEntry& e = f.reader->tensors().at(f.name);
  ANNEAL_ASSIGN_OR_RETURN(std::string_view bytes, f.reader->Bytes(f.name));
  std::vector<float> values(e.numel());
  if (e.dtype == "F32") {
    std::memcpy(values.data(), bytes.data(), values.size() * 4);
    return values;
  }
  for (size_t i = 0; i < values.size(); ++i) {
    uint16_t h;
    std::memcpy(&h, bytes.data() + 2 * i, 2);
    values[i] = e.dtype == "BF16" ? Bf16ToFloat(h) : F16ToFloat(h);
  }
  return values;
}

}  // namespace

Result<HfModel> ImportHfFolder(const std::string& dir) {
  HfModel out;
  ANNEAL_ASSIGN_OR_RETURN(out.config, ReadHfConfig(dir));
  const ModelFamily& fam = FamilyOf(out.config);
  const ParamLayout layout(out.config);
  HfWeights weights(dir);
  ANNEAL_RETURN_IF_ERROR(weights.Index());
  const std::vector<ModelFamily::HfTensor> specs = fam.HfTensors(out.config);
  std::vector<HfWeights::Found> found;
  for (const ModelFamily::HfTensor& t : specs) {
    ANNEAL_ASSIGN_OR_RETURN(HfWeights::Found f, weights.Find(t, layout));
    found.push_back(f);
  }
  out.params.assign(layout.total_floats(), 0.0f);
  for (const HfWeights::Found& f : found) {
    const std::string& dtype = f.reader->tensors().at(f.name).dtype;
    if (out.dtype.empty()) out.dtype = dtype == "F32" ? "f32" : dtype == "BF16" ? "bf16" : "f16";
    ANNEAL_ASSIGN_OR_RETURN(std::vector<float> values, ValuesOf(f));
    Scatter(f.a, f.spec->transpose, values, &out.params);
  }
  ANNEAL_RETURN_IF_ERROR(weights.CheckTheRest(out, fam));
  return out;
}

}  // namespace anneal
