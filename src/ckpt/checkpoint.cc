#include "ckpt/checkpoint.h"

#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <map>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "anneal_version.h"
#include "core/checksum.h"
#include "core/safetensors.h"
#include "dist/data_parallel.h"

namespace anneal {

using nlohmann::json;

namespace {

constexpr const char* kShardFile = "model.safetensors";

json ModelJson(const GptConfig& c) {
  return {{"vocab_size", c.vocab_size}, {"max_seq_len", c.max_seq_len}, {"n_layer", c.n_layer},
          {"n_head", c.n_head},         {"n_embd", c.n_embd}};
}

Result<json> ReadManifest(Env& env, const std::string& ckpt) {
  std::string path = JoinPath(ckpt, "manifest.json");
  ANNEAL_ASSIGN_OR_RETURN(std::string text, env.ReadFile(path));
  json m = json::parse(text, nullptr, false);
  if (!m.is_object() || m.value("format", "") != kCheckpointFormat) {
    return InvalidInput("checkpoint manifest " + path + " is not an anneal checkpoint manifest: it is corrupt; "
                        "delete " + ckpt + " to resume from the previous checkpoint");
  }
  if (m.value("version", 0) != kCheckpointVersion && m.value("version", 0) != 1) {
    return InvalidInput("checkpoint " + ckpt + " has manifest version " + m.value("version", json()).dump() +
                        "; this anneal reads versions 1 and 2");
  }
  return m;
}

}  // namespace

std::string CheckpointName(int step) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "step-%08d", step);
  return buf;
}

Status SaveCheckpoint(Env& env, const std::string& dir, const GptModel& model, const AdamW* opt,
                      const TrainerState& state, const CheckpointLineage& lineage, const CheckpointWriters& writers) {
  const std::string ckpt = JoinPath(dir, CheckpointName(state.step));
  if (env.Exists(JoinPath(ckpt, "manifest.json")) && ReadManifest(env, ckpt).ok()) return Status::Ok();
  ANNEAL_RETURN_IF_ERROR(env.CreateDirs(ckpt));
  const int rank = writers.comm ? writers.comm->rank() : 0, ranks = writers.comm ? writers.comm->size() : 1;
  const bool sharded_opt = opt && writers.zero > 0;
  const GptConfig& c = model.config();
  const ParamLayout& layout = model.layout();
  // Rank 0: the parameters (and the replicated optimizer state); with ZeRO each rank also writes
  // the flat ranges of the moments it owns.
  SafeTensorsWriter w;
  json tensors = json::object();
  auto whole = [&](const std::string& key, const ParamInfo& p, const float* data, const std::string& file) {
    // Canonical shape: for wte the first V of Vp rows (row-major, so a prefix of the buffer).
    w.AddF32(key, p.shape, data);
    json box = {{"offset", std::vector<int64_t>(p.shape.size(), 0)}, {"length", p.shape}};
    tensors[key] = {{"shape", p.shape}, {"parts", json::array({{{"file", file}, {"box", box}}})}};
  };
  std::string file;
  if (rank == 0) {
    file = kShardFile;
    for (const ParamInfo& p : layout.params()) whole("param." + p.name, p, model.params() + p.offset, file);
    if (opt && !sharded_opt) {
      for (const ParamInfo& p : layout.params()) whole("opt.m." + p.name, p, opt->m().data() + p.offset, file);
      for (const ParamInfo& p : layout.params()) whole("opt.v." + p.name, p, opt->v().data() + p.offset, file);
    }
  }
  // One entry per (rank, file): [name, bytes, xxh64] travel to rank 0 through an all-gather.
  struct FileRecord {
    char name[48];
    uint64_t bytes, xxh64;
  };
  std::vector<FileRecord> mine;
  auto flush = [&](const std::string& name) -> Status {
    w.SetMetadata("format", kCheckpointFormat);
    std::string image = w.Serialize();
    FileRecord r{};
    std::snprintf(r.name, sizeof(r.name), "%s", name.c_str());
    r.bytes = image.size();
    r.xxh64 = Xxh64(image);
    mine.push_back(r);
    w = SafeTensorsWriter();
    return env.WriteFileAtomic(JoinPath(ckpt, name), image);
  };
  if (rank == 0) ANNEAL_RETURN_IF_ERROR(flush(file));
  json opt_parts = json::object();  // this rank's flat ranges, added to rank 0's manifest below
  if (sharded_opt) {
    char name[48];
    std::snprintf(name, sizeof(name), "optim-%05d-of-%05d.safetensors", rank, ranks);
    for (const char* which : {"m", "v"}) {
      const std::vector<float>& mom = which[0] == 'm' ? opt->m() : opt->v();
      for (const ParamInfo& p : layout.params()) {
        // The tensor's elements inside [begin, end), canonical (never the vocabulary padding).
        const size_t lo = std::max(opt->begin(), p.offset), hi = std::min(opt->end(), p.offset + p.size);
        if (lo >= hi) continue;
        const std::string key = std::string("opt.") + which + "." + p.name;
        w.AddF32(key, {static_cast<int64_t>(hi - lo)}, mom.data() + (lo - opt->begin()));
      }
    }
    ANNEAL_RETURN_IF_ERROR(flush(name));
  }
  // Fault injection for the resume test (tests/e2e/resume_test.sh): die like kill -9 between the
  // shard and the manifest of step N, the moment a torn checkpoint would be most tempting to trust.
  if (const char* f = std::getenv("ANNEAL_FAULT_KILL_IN_CHECKPOINT"); f && std::atoi(f) == state.step && rank == 0) {
    ::raise(SIGKILL);
  }
  // Every rank's files reach rank 0 (at most one record per rank beyond rank 0's params file).
  std::vector<FileRecord> all;
  if (writers.comm && ranks > 1) {
    std::vector<FileRecord> send(2);
    for (size_t i = 0; i < mine.size(); ++i) send[i] = mine[i];
    std::vector<FileRecord> recv(2 * ranks);
    ANNEAL_RETURN_IF_ERROR(writers.comm->AllGatherBytes(send.data(), 2 * sizeof(FileRecord), recv.data()));
    for (const FileRecord& r : recv) {
      if (r.name[0]) all.push_back(r);
    }
  } else {
    all = mine;
  }
  Status result = Status::Ok();
  if (rank == 0) {
    json files = json::array();
    for (const FileRecord& r : all) files.push_back({{"name", r.name}, {"bytes", r.bytes}, {"xxh64", HexU64(r.xxh64)}});
    if (sharded_opt) {
      // The flat ranges each rank's file holds, recomputed from the shard rule every rank used.
      for (int r = 0; r < ranks; ++r) {
        char name[48];
        std::snprintf(name, sizeof(name), "optim-%05d-of-%05d.safetensors", r, ranks);
        const size_t b = DataParallel::ShardBegin(layout.total_floats(), ranks, r);
        const size_t e = b + DataParallel::ShardCount(layout.total_floats(), ranks, r);
        for (const char* which : {"m", "v"}) {
          for (const ParamInfo& p : layout.params()) {
            const size_t lo = std::max(b, p.offset), hi = std::min(e, p.offset + p.size);
            if (lo >= hi) continue;
            json& t = tensors[std::string("opt.") + which + "." + p.name];
            if (t.is_null()) t = {{"shape", p.shape}, {"parts", json::array()}};
            t["parts"].push_back({{"file", name}, {"range", {lo - p.offset, hi - lo}}});
          }
        }
      }
    }
    const char* attempt = std::getenv("ANNEAL_ATTEMPT");
    json config = json::parse(lineage.config_json, nullptr, false);
    json manifest = {
        {"format", kCheckpointFormat},
        {"version", kCheckpointVersion},
        {"step", state.step},
        {"attempt", attempt ? std::atoi(attempt) : 0},
        {"lineage",
         {{"anneal", std::string(ANNEAL_VERSION) + " (commit " + ANNEAL_GIT_COMMIT + ")"},
          {"config", config.is_discarded() ? json(lineage.config_json) : config},
          {"dataset", {{"dir", lineage.dataset_dir}, {"inputs_hash", lineage.dataset_hash}}}}},
        {"layout", {{"dp", ranks}, {"tp", 1}, {"pp", 1}, {"zero", writers.zero}, {"ranks", ranks}}},
        {"model", ModelJson(c)},
        {"files", files},
        {"tensors", tensors},
        {"trainer",
         {{"step", state.step},
          {"updates", state.updates},
          {"bad_steps", state.bad_steps},
          {"skipped_total", state.skipped_total},
          {"loader", {{"seed", state.loader.seed}, {"samples", state.loader.samples}}},
          {"optimizer", opt ? json{{"lr", opt->options().lr},
                                    {"min_lr", opt->options().min_lr},
                                    {"warmup_steps", opt->options().warmup_steps},
                                    {"decay_steps", opt->options().decay_steps}}
                            : json()}}}};
    // The manifest last: until it is renamed into place, this checkpoint does not exist.
    result = env.WriteFileAtomic(JoinPath(ckpt, "manifest.json"), manifest.dump(1) + "\n");
  }
  // Nobody reports the checkpoint (or goes on to delete older ones) before it is complete.
  if (writers.comm && ranks > 1) {
    int32_t ok = result.ok() ? 1 : 0;
    ANNEAL_RETURN_IF_ERROR(writers.comm->Broadcast(&ok, sizeof(ok), 0));
    if (!ok && rank != 0) return IoError("rank 0 failed to write the manifest of " + ckpt);
  }
  return result;
}

Result<std::optional<std::string>> FindNewestCheckpoint(Env& env, const std::string& dir) {
  if (!env.IsDirectory(dir)) return std::optional<std::string>();
  ANNEAL_ASSIGN_OR_RETURN(auto names, env.ListDir(dir));
  std::sort(names.rbegin(), names.rend());  // step-NNNNNNNN sorts by step
  for (const auto& n : names) {
    if (n.rfind("step-", 0) != 0 || n.size() != 13 || n.find(".tmp") != std::string::npos) continue;
    std::string ckpt = JoinPath(dir, n);
    if (!env.Exists(JoinPath(ckpt, "manifest.json"))) continue;  // incomplete: does not exist
    return std::optional<std::string>(ckpt);
  }
  return std::optional<std::string>();
}

Result<GptConfig> ReadCheckpointModelConfig(Env& env, const std::string& ckpt) {
  ANNEAL_ASSIGN_OR_RETURN(json m, ReadManifest(env, ckpt));
  try {
    const json& j = m.at("model");
    return GptConfig::Make(j.at("vocab_size"), j.at("max_seq_len"), j.at("n_layer"), j.at("n_head"), j.at("n_embd"));
  } catch (const std::exception& e) {
    return InvalidInput("checkpoint " + ckpt + ": manifest has no valid \"model\" section (" + e.what() + ")");
  }
}

Status LoadCheckpoint(Env& env, const std::string& ckpt, GptModel* model, AdamW* opt, TrainerState* state) {
  ANNEAL_ASSIGN_OR_RETURN(json m, ReadManifest(env, ckpt));
  const GptConfig& c = model->config();
  if (m.value("model", json()) != ModelJson(c)) {
    return InvalidInput("checkpoint " + ckpt + " holds a model of shape " + m.value("model", json()).dump() +
                        " but this run's model is " + ModelJson(c).dump() +
                        ": use the checkpoint's model settings, or another checkpoint_dir");
  }
  auto corrupt = [&](const std::string& what) {
    return InvalidInput("checkpoint " + ckpt + ": " + what + ": the checkpoint is corrupt; delete " + ckpt +
                        " to resume from the previous one");
  };
  std::map<std::string, json> file_info;
  for (const auto& f : m.at("files")) file_info[f.at("name").get<std::string>()] = f;
  // Files are opened (and their size and checksum verified) the first time a needed part is in them.
  std::map<std::string, std::unique_ptr<SafeTensorsReader>> readers;
  auto reader = [&](const std::string& name) -> Result<SafeTensorsReader*> {
    if (auto it = readers.find(name); it != readers.end()) return it->second.get();
    if (!file_info.count(name)) return corrupt("file " + name + " is not listed in the manifest");
    const std::string path = JoinPath(ckpt, name);
    auto size = env.FileSize(path);
    if (!size.ok() || *size != file_info[name].at("bytes").get<uint64_t>()) {
      return corrupt("file " + path + " is missing or has the wrong size");
    }
    // Checksum the mapped file (no copy: a shard is as large as the model state).
    ANNEAL_ASSIGN_OR_RETURN(auto map, env.Map(path, Env::MapMode::kLazy));
    if (HexU64(Xxh64(std::string_view(map->data(), map->size()))) != file_info[name].at("xxh64").get<std::string>()) {
      return corrupt("file " + path + " fails its checksum");
    }
    ANNEAL_ASSIGN_OR_RETURN(auto r, SafeTensorsReader::Open(env, path));
    return (readers[name] = std::move(r)).get();
  };
  // The parts of a tensor as (file, flat start, length); version 1 kept one whole tensor per entry.
  struct Part {
    std::string file;
    size_t start, length;
  };
  const bool v1 = m.at("version") == 1;
  auto parts_of = [&](const std::string& key, const ParamInfo& p) -> Result<std::vector<Part>> {
    const json& t = m.at("tensors").value(key, json());
    if (t.is_null()) return corrupt("tensor " + key + " is missing from the manifest");
    std::vector<Part> out;
    const json parts = v1 ? json::array({t}) : t.at("parts");
    for (const json& part : parts) {
      if (part.contains("range")) {
        out.push_back({part.at("file"), part.at("range")[0], part.at("range")[1]});
      } else {  // a box: only whole tensors or row blocks are written today, so flat = row-major
        const auto off = part.at("box").at("offset").get<std::vector<size_t>>();
        const auto len = part.at("box").at("length").get<std::vector<size_t>>();
        size_t inner = 1, n = 1;
        for (size_t d = 1; d < len.size(); ++d) inner *= len[d];
        for (size_t v : len) n *= v;
        for (size_t d = 1; d < off.size(); ++d) {
          if (off[d] != 0 || len[d] != static_cast<size_t>(p.shape[d])) {
            return Internal("checkpoint " + ckpt + ": tensor " + key + " is split along an inner dimension, which this "
                            "anneal cannot load yet");
          }
        }
        out.push_back({part.at("file"), off.empty() ? 0 : off[0] * inner, n});
      }
    }
    return out;
  };
  // Fills dst with elements [lo, hi) of tensor `key` (canonical flat coordinates).
  auto fill = [&](const std::string& key, const ParamInfo& p, size_t lo, size_t hi, float* dst) -> Status {
    ANNEAL_ASSIGN_OR_RETURN(std::vector<Part> parts, parts_of(key, p));
    size_t covered = 0;
    for (const Part& part : parts) {
      const size_t a = std::max(lo, part.start), b = std::min(hi, part.start + part.length);
      if (a >= b) continue;
      ANNEAL_ASSIGN_OR_RETURN(SafeTensorsReader * r, reader(part.file));
      ANNEAL_ASSIGN_OR_RETURN(std::vector<float> v, r->ReadF32(key));
      if (v.size() != part.length) return corrupt("tensor " + key + " in " + part.file + " has the wrong size");
      std::copy(v.begin() + (a - part.start), v.begin() + (b - part.start), dst + (a - lo));
      covered += b - a;
    }
    if (covered != hi - lo) {
      return corrupt("its parts of " + key + " cover " + std::to_string(covered) + " of the " + std::to_string(hi - lo) +
                     " elements needed");
    }
    return Status::Ok();
  };
  for (const ParamInfo& p : model->layout().params()) {
    float* base = model->params() + p.offset;
    ANNEAL_RETURN_IF_ERROR(fill("param." + p.name, p, 0, p.size, base));
    std::fill(base + p.size, base + p.stored_size, 0.0f);  // vocabulary padding
  }
  if (opt) {
    if (!m.at("tensors").contains("opt.m.wte.weight")) {
      return InvalidInput("checkpoint " + ckpt + " holds no optimizer state (weights only)");
    }
    for (const char* which : {"m", "v"}) {
      std::vector<float>& mom = which[0] == 'm' ? opt->m() : opt->v();
      for (const ParamInfo& p : model->layout().params()) {
        const size_t lo = std::max(opt->begin(), p.offset), hi = std::min(opt->end(), p.offset + p.stored_size);
        if (lo >= hi) continue;
        float* dst = mom.data() + (lo - opt->begin());
        std::fill(dst, dst + (hi - lo), 0.0f);  // padding rows stay zero
        const size_t a = lo - p.offset, b = std::min(hi - p.offset, p.size);
        if (a < b) ANNEAL_RETURN_IF_ERROR(fill(std::string("opt.") + which + "." + p.name, p, a, b, dst));
      }
    }
  }
  if (state) {
    const json& t = m.at("trainer");
    state->step = t.at("step");
    state->updates = t.at("updates");
    state->bad_steps = t.at("bad_steps");
    state->skipped_total = t.at("skipped_total");
    state->loader.seed = t.at("loader").at("seed");
    state->loader.samples = t.at("loader").at("samples");
    if (opt) opt->set_updates(state->updates);
  }
  return Status::Ok();
}

}  // namespace anneal
