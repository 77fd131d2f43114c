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
#include "model/box.h"

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

namespace {

// One part a rank writes: tensor `key` of the manifest, the box of parameter p, and the range of the
// box's elements held (count -1: all of them). what: 'p' parameters, 'm' / 'v' the Adam moments.
struct WrittenPart {
  std::string key, file;
  const ParamInfo* p;
  char what;
  int64_t start = 0, count = -1;
};

// Where rank r sits and what it holds.
struct RankView {
  int dp_rank = 0, pp_rank = 0, tp_rank = 0;
  ModelShard shard;
};

RankView ViewOf(const CheckpointWriters& w, int r) {
  RankView v;
  if (!w.plan) {
    v.dp_rank = r;
    return v;
  }
  const int tp = w.plan->dims().tp, pp = w.plan->dims().pp;
  v.tp_rank = r % tp;
  v.pp_rank = (r / tp) % pp;
  v.dp_rank = r / (tp * pp);
  v.shard = w.plan->ShardOf(v.pp_rank, v.tp_rank);
  return v;
}

std::string ParamsFile(const CheckpointWriters& w, const RankView& v) {
  if (!w.plan || (w.plan->dims().tp == 1 && w.plan->dims().pp == 1)) return kShardFile;
  char name[64];
  std::snprintf(name, sizeof(name), "model-pp%02d-tp%02d.safetensors", v.pp_rank, v.tp_rank);
  return name;
}

std::string OptimFile(int rank, int ranks) {
  char name[48];
  std::snprintf(name, sizeof(name), "optim-%05d-of-%05d.safetensors", rank, ranks);
  return name;
}

// Everything rank r writes, from the layout rule alone (so rank 0 can describe the others' files).
// layout: rank r's ParamLayout; ranks: the job's.
std::vector<WrittenPart> PartsOf(const CheckpointWriters& w, int r, int ranks, const ParamLayout& layout, bool with_opt) {
  const RankView v = ViewOf(w, r);
  const int dp = w.plan ? w.plan->dims().dp : ranks;
  std::vector<WrittenPart> out;
  if (v.dp_rank == 0) {
    const std::string file = ParamsFile(w, v);
    for (const char what : {'p', 'm', 'v'}) {
      if (what != 'p' && (!with_opt || w.zero > 0)) continue;
      for (const ParamInfo& p : layout.params()) {
        if (!p.owner(v.shard)) continue;
        const std::string prefix = what == 'p' ? "param." : what == 'm' ? "opt.m." : "opt.v.";
        out.push_back({prefix + p.name, file, &p, what});
      }
    }
  }
  if (with_opt && w.zero > 0) {
    const std::string file = OptimFile(r, ranks);
    const size_t b = DataParallel::ShardBegin(layout.total_floats(), dp, v.dp_rank);
    const size_t e = b + DataParallel::ShardCount(layout.total_floats(), dp, v.dp_rank);
    for (const char what : {'m', 'v'}) {
      for (const ParamInfo& p : layout.params()) {
        // The tensor's box elements inside [b, e) (never the vocabulary padding).
        const size_t lo = std::max(b, p.offset), hi = std::min(e, p.offset + p.size);
        if (lo >= hi || !p.owner(v.shard)) continue;
        out.push_back({std::string("opt.") + what + "." + p.name, file, &p, what, static_cast<int64_t>(lo - p.offset),
                       static_cast<int64_t>(hi - lo)});
      }
    }
  }
  return out;
}

}  // namespace

Status SaveCheckpoint(Env& env, const std::string& dir, const GptModel& model, const AdamW* opt,
                      const TrainerState& state, const CheckpointLineage& lineage, const CheckpointWriters& writers) {
  const std::string ckpt = JoinPath(dir, CheckpointName(state.step));
  if (env.Exists(JoinPath(ckpt, "manifest.json")) && ReadManifest(env, ckpt).ok()) return Status::Ok();
  ANNEAL_RETURN_IF_ERROR(env.CreateDirs(ckpt));
  const int rank = writers.comm ? writers.comm->rank() : 0, ranks = writers.comm ? writers.comm->size() : 1;
  const GptConfig& c = model.config();
  // This rank's files: its parts grouped by file, in order.
  std::vector<WrittenPart> mine_parts = PartsOf(writers, rank, ranks, model.layout(), opt != nullptr);
  struct FileRecord {
    char name[48];
    uint64_t bytes, xxh64;
  };
  std::vector<FileRecord> mine;
  for (size_t i = 0; i < mine_parts.size();) {
    const std::string file = mine_parts[i].file;
    SafeTensorsWriter w;
    for (; i < mine_parts.size() && mine_parts[i].file == file; ++i) {
      const WrittenPart& part = mine_parts[i];
      const ParamInfo& p = *part.p;
      if (part.count < 0) {
        const float* src = part.what == 'p' ? model.params() + p.offset
                                            : (part.what == 'm' ? opt->m() : opt->v()).data() + p.offset;
        w.AddF32(part.key, p.box_length, src);
      } else {
        const std::vector<float>& mom = part.what == 'm' ? opt->m() : opt->v();
        w.AddF32(part.key, {part.count}, mom.data() + (p.offset + part.start - opt->begin()));
      }
    }
    w.SetMetadata("format", kCheckpointFormat);
    std::string image = w.Serialize();
    FileRecord r{};
    std::snprintf(r.name, sizeof(r.name), "%s", file.c_str());
    r.bytes = image.size();
    r.xxh64 = Xxh64(image);
    mine.push_back(r);
    ANNEAL_RETURN_IF_ERROR(env.WriteFileAtomic(JoinPath(ckpt, file), image));
  }
  // Fault injection for the resume test (tests/e2e/resume_test.sh): die like kill -9 between the
  // shard and the manifest of step N, the moment a torn checkpoint would be most tempting to trust.
  if (const char* f = std::getenv("ANNEAL_FAULT_KILL_IN_CHECKPOINT"); f && std::atoi(f) == state.step && rank == 0) {
    ::raise(SIGKILL);
  }
  // Every rank's files reach rank 0 (at most two per rank: parameters and optimizer shard).
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
    // Every rank's parts, recomputed from the layout rule every rank used.
    json tensors = json::object();
    for (int r = 0; r < ranks; ++r) {
      const ParamLayout layout(c, ViewOf(writers, r).shard);
      for (const WrittenPart& part : PartsOf(writers, r, ranks, layout, opt != nullptr)) {
        json& t = tensors[part.key];
        if (t.is_null()) t = {{"shape", part.p->shape}, {"parts", json::array()}};
        json entry = {{"file", part.file}, {"box", {{"offset", part.p->box_offset}, {"length", part.p->box_length}}}};
        if (part.count >= 0) entry["range"] = {part.start, part.count};
        t["parts"].push_back(entry);
      }
    }
    json layout = {{"dp", ranks}, {"tp", 1}, {"pp", 1}, {"zero", writers.zero}, {"ranks", ranks}};
    if (writers.plan) {
      const ParallelDims& d = writers.plan->dims();
      layout = {{"dp", d.dp}, {"tp", d.tp}, {"pp", d.pp}, {"zero", writers.zero}, {"ranks", ranks},
                {"stages", writers.plan->stages()}, {"schedule", d.schedule}};
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
        {"layout", layout},
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
  // The parts of a tensor, each a box of it and a range of the box's elements; version 1 kept one
  // whole tensor per entry, and a part with a range but no box is a range of the whole tensor.
  struct Part {
    std::string file;
    BoxPart box;
  };
  const bool v1 = m.at("version") == 1;
  auto parts_of = [&](const std::string& key, const ParamInfo& p) -> Result<std::vector<Part>> {
    const json& t = m.at("tensors").value(key, json());
    if (t.is_null()) return corrupt("tensor " + key + " is missing from the manifest");
    std::vector<Part> out;
    const json parts = v1 ? json::array({t}) : t.at("parts");
    try {
      for (const json& part : parts) {
        std::vector<int64_t> off(p.shape.size(), 0), len = p.shape;
        if (part.contains("box")) {
          off = part.at("box").at("offset").get<std::vector<int64_t>>();
          len = part.at("box").at("length").get<std::vector<int64_t>>();
        }
        if (off.size() != p.shape.size() || len.size() != p.shape.size()) {
          return corrupt("a part of " + key + " has a box of the wrong rank");
        }
        int64_t start = 0, count = -1;
        if (part.contains("range")) {
          start = part.at("range")[0];
          count = part.at("range")[1];
        }
        out.push_back({part.at("file"), MakeBoxPart(off, len, start, count)});
      }
    } catch (const std::exception& e) {
      return corrupt(std::string("a part of ") + key + " is malformed (" + e.what() + ")");
    }
    return out;
  };
  // Fills dst with the elements of `want` (a part of tensor `key`) from whichever stored parts hold them.
  auto fill = [&](const std::string& key, const ParamInfo& p, const BoxPart& want, float* dst) -> Status {
    ANNEAL_ASSIGN_OR_RETURN(std::vector<Part> parts, parts_of(key, p));
    size_t covered = 0;
    for (const Part& part : parts) {
      if (CopyOverlap(part.box, nullptr, want, nullptr, /*count_only=*/true) == 0) continue;
      ANNEAL_ASSIGN_OR_RETURN(SafeTensorsReader * r, reader(part.file));
      ANNEAL_ASSIGN_OR_RETURN(std::vector<float> v, r->ReadF32(key));
      if (static_cast<int64_t>(v.size()) != part.box.elements()) {
        return corrupt("tensor " + key + " in " + part.file + " has the wrong size");
      }
      covered += CopyOverlap(part.box, v.data(), want, dst);
    }
    if (covered != static_cast<size_t>(want.elements())) {
      return corrupt("its parts of " + key + " cover " + std::to_string(covered) + " of the " +
                     std::to_string(want.elements()) + " elements needed");
    }
    return Status::Ok();
  };
  for (const ParamInfo& p : model->layout().params()) {
    float* base = model->params() + p.offset;
    ANNEAL_RETURN_IF_ERROR(fill("param." + p.name, p, MakeBoxPart(p.box_offset, p.box_length), base));
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
        if (a < b) {
          const BoxPart want = MakeBoxPart(p.box_offset, p.box_length, static_cast<int64_t>(a), static_cast<int64_t>(b - a));
          ANNEAL_RETURN_IF_ERROR(fill(std::string("opt.") + which + "." + p.name, p, want, dst));
        }
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
