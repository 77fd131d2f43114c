#include "ckpt/checkpoint.h"

#include <unistd.h>


#include <cctype>
#include <chrono>
#include <set>

#include <algorithm>
#include <map>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "anneal_version.h"
#include "core/checksum.h"
#include "core/safetensors.h"
#include "core/trace.h"
#include "model/box.h"
#include "tensor/host_copy.h"

namespace anneal {

using nlohmann::json;

namespace {

constexpr const char* kShardFile = "model.safetensors";

// A GPT-2 model's section is the five shape fields (as every checkpoint before the families had);
// another family's adds "family" and the fields that family reads.
json ModelJson(const ModelConfig& c) {
  json j = {{"vocab_size", c.vocab_size}, {"max_seq_len", c.max_seq_len}, {"n_layer", c.n_layer},
            {"n_head", c.n_head},         {"n_embd", c.n_embd}};
  if (c.family == "gpt2") return j;
  j["family"] = c.family;
  j["n_kv_head"] = c.n_kv_head;
  j["intermediate_size"] = c.intermediate_size;
  j["norm_eps"] = c.norm_eps;
  j["rope_theta"] = c.rope_theta;
  j["tie_embeddings"] = c.tie_embeddings;
  if (c.rope_scaling.on()) {
    j["rope_scaling"] = {{"factor", c.rope_scaling.factor},
                         {"low_freq_factor", c.rope_scaling.low_freq_factor},
                         {"high_freq_factor", c.rope_scaling.high_freq_factor},
                         {"original_max_seq_len", c.rope_scaling.original_max_seq_len}};
  }
  return j;
}

Result<ModelConfig> ModelFromJson(const json& j) {
  ModelConfig c;
  c.family = j.value("family", "gpt2");
  c.vocab_size = j.at("vocab_size");
  c.max_seq_len = j.at("max_seq_len");
  c.n_layer = j.at("n_layer");
  c.n_head = j.at("n_head");
  c.n_embd = j.at("n_embd");
  if (c.family != "gpt2") {
    c.n_kv_head = j.at("n_kv_head");
    c.intermediate_size = j.at("intermediate_size");
    c.norm_eps = j.at("norm_eps");
    c.rope_theta = j.at("rope_theta");
    c.tie_embeddings = j.at("tie_embeddings");
    if (j.contains("rope_scaling")) {
      const json& r = j.at("rope_scaling");
      c.rope_scaling = {r.at("factor"), r.at("low_freq_factor"), r.at("high_freq_factor"), r.at("original_max_seq_len")};
    }
  }
  ANNEAL_RETURN_IF_ERROR(c.Finish());
  return c;
}

Result<json> ReadManifest(ObjectStore& store, const std::string& name) {
  const std::string key = name + "/manifest.json";
  ANNEAL_ASSIGN_OR_RETURN(std::string text, store.Get(key));
  json m = json::parse(text, nullptr, false);
  if (!m.is_object() || m.value("format", "") != kCheckpointFormat) {
    return InvalidInput("checkpoint manifest " + key + " in " + store.Describe() +
                        " is not an anneal checkpoint manifest: it is corrupt; delete " + name +
                        " (anneal ckpt rm) to resume from the previous checkpoint");
  }
  if (m.value("version", 0) != kCheckpointVersion && m.value("version", 0) != 1) {
    return InvalidInput("checkpoint " + name + " has manifest version " + m.value("version", json()).dump() +
                        "; this anneal reads versions 1 and 2");
  }
  return m;
}

// "step-00000042" -> 42; -1 for anything else.
int StepOf(const std::string& name) {
  if (name.size() != 13 || name.rfind("step-", 0) != 0) return -1;
  for (size_t i = 5; i < 13; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return -1;
  }
  return std::atoi(name.c_str() + 5);
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

std::string ParamRangeFile(int rank, int ranks) {
  char name[48];
  std::snprintf(name, sizeof(name), "model-%05d-of-%05d.safetensors", rank, ranks);
  return name;
}

// Everything rank r writes, from the layout rule alone (so rank 0 can describe the others' files).
// layout: rank r's ParamLayout; ranks: the job's.
std::vector<WrittenPart> PartsOf(const CheckpointWriters& w, int r, int ranks, const ParamLayout& layout, bool with_opt) {
  const RankView v = ViewOf(w, r);
  const int shards = w.plan ? w.plan->zero_shards() : ranks;  // with shard groups the first group writes
  std::vector<WrittenPart> out;
  const bool ranged_params = w.params_sharded && with_opt && w.zero > 0;
  if (v.dp_rank == 0) {
    const std::string file = ParamsFile(w, v);
    for (const char what : {'p', 'm', 'v'}) {
      if (what == 'p' && ranged_params) continue;
      if (what != 'p' && (!with_opt || w.zero > 0)) continue;
      for (const ParamInfo& p : layout.params()) {
        if (!p.owner(v.shard)) continue;
        const std::string prefix = what == 'p' ? "param." : what == 'm' ? "opt.m." : "opt.v.";
        out.push_back({prefix + p.name, file, &p, what});
      }
    }
  }
  if (with_opt && w.zero > 0 && v.dp_rank < shards) {
    const std::string file = OptimFile(r, ranks);
    const size_t b = ParallelPlan::ZeroShardBegin(layout.total_floats(), shards, v.dp_rank);
    const size_t e = b + ParallelPlan::ZeroShardCount(layout.total_floats(), shards, v.dp_rank);
    for (const char what : {'p', 'm', 'v'}) {
      if (what == 'p' && !ranged_params) continue;
      for (const ParamInfo& p : layout.params()) {
        // The tensor's box elements inside [b, e) (never the vocabulary padding).
        const size_t lo = std::max(b, p.offset), hi = std::min(e, p.offset + p.size);
        if (lo >= hi || !p.owner(v.shard)) continue;
        const std::string key = what == 'p' ? "param." + p.name : std::string("opt.") + what + "." + p.name;
        out.push_back({key, what == 'p' ? ParamRangeFile(r, ranks) : file, &p, what,
                       static_cast<int64_t>(lo - p.offset), static_cast<int64_t>(hi - lo)});
      }
    }
  }
  return out;
}

}  // namespace

namespace {

// The model's parameters and the optimizer's moments as host fp32 memory.
struct HostState {
  const float* params = nullptr;
  const float* m = nullptr;
  const float* v = nullptr;
};

// The same, readable on the host while this lives: the memory itself on a host backend, a
// synchronous copy otherwise.
struct HostCopies {
  explicit HostCopies(const CheckpointTensors& t)
      : params(*t.backend, t.params, t.param_floats()),
        m(*t.backend, static_cast<const float*>(t.m.p), t.moment_floats()),
        v(*t.backend, static_cast<const float*>(t.v.p), t.moment_floats()) {}
  HostState state() const { return {params.data(), m.data(), v.data()}; }
  HostRead params, m, v;
};

// This rank's files, each a writer over views of the host state (no copy yet).
std::vector<std::pair<std::string, SafeTensorsWriter>> FileWriters(const CheckpointTensors& t, const HostState& host,
                                                                   const CheckpointWriters& writers) {
  std::vector<std::pair<std::string, SafeTensorsWriter>> out;
  const std::vector<WrittenPart> parts = PartsOf(writers, writers.rank, writers.ranks, *t.layout, t.has_optimizer());
  for (size_t i = 0; i < parts.size();) {
    const std::string file = parts[i].file;
    SafeTensorsWriter w;
    for (; i < parts.size() && parts[i].file == file; ++i) {
      const WrittenPart& part = parts[i];
      const ParamInfo& p = *part.p;
      if (part.count < 0) {
        const float* src = (part.what == 'p' ? host.params : part.what == 'm' ? host.m : host.v) + p.offset;
        w.AddF32View(part.key, p.box_length, src);
      } else {  // a range of [begin, end): the moments, or ZeRO-3's parameters
        const float* src = part.what == 'p' ? host.params : part.what == 'm' ? host.m : host.v;
        w.AddF32View(part.key, {part.count}, src + (p.offset + part.start - t.begin));
      }
    }
    w.SetMetadata("format", kCheckpointFormat);
    out.emplace_back(file, std::move(w));
  }
  return out;
}

}  // namespace

namespace {

// Each file's image, serialized into a buffer of an earlier snapshot where there is one.
void SerializeFiles(const CheckpointTensors& t, const HostState& host, const CheckpointWriters& writers,
                    const std::string& dir, std::vector<std::string>* spare,
                    std::vector<std::pair<std::string, std::string>>* files) {
  for (auto& [file, w] : FileWriters(t, host, writers)) {
    std::string image;
    if (spare && !spare->empty()) {
      image = std::move(spare->back());
      spare->pop_back();
    }
    w.SerializeTo(&image);
    files->emplace_back(dir + file, std::move(image));
  }
}

}  // namespace

Status FinishSnapshot(CheckpointSnapshot* snap) {
  if (!snap->finish) return Status::Ok();
  auto finish = std::move(snap->finish);
  snap->finish = nullptr;
  return finish(snap);
}

std::vector<size_t> CheckpointImageSizes(const CheckpointTensors& t, const CheckpointWriters& writers) {
  std::vector<size_t> out;
  const HostCopies host(t);
  for (const auto& [file, w] : FileWriters(t, host.state(), writers)) out.push_back(w.SerializedSize());
  return out;
}

void AsyncCheckpointer::Reserve(std::vector<size_t> sizes) {
  if (!Wait().ok()) return;
  thread_ = std::thread([this, sizes = std::move(sizes)] {
    for (size_t n : sizes) {
      std::string b(n, '\0');  // zero-filled: every page faulted in here, not during a snapshot
      spare_.push_back(std::move(b));
    }
  });
}

uint64_t CheckpointSnapshot::bytes() const {
  uint64_t n = 0;
  for (const auto& f : files) n += f.second.size();
  return n;
}

Result<std::unique_ptr<ObjectStore>> OpenCheckpointStore(const std::string& dir_or_uri) {
  return OpenObjectStore(dir_or_uri);
}

Result<CheckpointSnapshot> SnapshotCheckpoint(ObjectStore& store, const CheckpointTensors& t,
                                              const TrainerState& state, const CheckpointLineage& lineage,
                                              const CheckpointWriters& writers, const CheckpointOptions& o,
                                              std::vector<std::string>* spare, SnapshotStaging* staging) {
  CheckpointSnapshot snap;
  snap.name = CheckpointName(state.step);
  snap.step = state.step;
  snap.rank = writers.rank;
  snap.ranks = writers.ranks;
  snap.attempt = o.attempt;
  // A complete checkpoint of this step is never touched again.
  if (ReadManifest(store, snap.name).ok()) {
    snap.skip = true;
    return snap;
  }
  const std::string dir = "attempt-" + std::to_string(snap.attempt) + "/";
  if (staging) {  // copies queued now, the files serialized on the writer's thread once they are done
    ANNEAL_RETURN_IF_ERROR(
        staging->Begin(t.stream, {t.params, t.m, t.v}, {t.param_floats(), t.moment_floats(), t.moment_floats()}));
    std::vector<std::string> images;
    if (spare) images = std::move(*spare), spare->clear();
    snap.finish = [staging, t, writers, dir, images = std::move(images)](CheckpointSnapshot* s) mutable {
      const std::vector<const float*> h = staging->Wait();
      SerializeFiles(t, HostState{h[0], h[1], h[2]}, writers, dir, &images, &s->files);
      return Status::Ok();
    };
  } else {
    const HostCopies host(t);
    SerializeFiles(t, host.state(), writers, dir, spare, &snap.files);
  }
  if (writers.rank == 0) {
    // Every rank's parts, recomputed from the layout rule every rank used.
    json tensors = json::object();
    const ModelConfig& c = *t.model;
    for (int r = 0; r < writers.ranks; ++r) {
      const ParamLayout layout(c, ViewOf(writers, r).shard);
      for (const WrittenPart& part : PartsOf(writers, r, writers.ranks, layout, t.has_optimizer())) {
        json& entry_of = tensors[part.key];
        if (entry_of.is_null()) entry_of = {{"shape", part.p->shape}, {"parts", json::array()}};
        json entry = {{"file", dir + part.file},
                      {"box", {{"offset", part.p->box_offset}, {"length", part.p->box_length}}}};
        if (part.count >= 0) entry["range"] = {part.start, part.count};
        entry_of["parts"].push_back(entry);
      }
    }
    json layout = {{"dp", writers.ranks}, {"tp", 1}, {"pp", 1}, {"zero", writers.zero}, {"ranks", writers.ranks}};
    if (writers.plan) {
      const ParallelDims& d = writers.plan->dims();
      layout = {{"dp", d.dp}, {"tp", d.tp}, {"pp", d.pp}, {"zero", writers.zero}, {"ranks", writers.ranks},
                {"stages", writers.plan->stages()}, {"schedule", d.schedule}};
      if (writers.plan->zero_shards() < d.dp) layout["shard_group"] = writers.plan->zero_shards();
    }
    json config = json::parse(lineage.config_json, nullptr, false);
    json manifest = {
        {"format", kCheckpointFormat},
        {"version", kCheckpointVersion},
        {"step", state.step},
        {"attempt", snap.attempt},
        {"lineage",
         {{"anneal", std::string(ANNEAL_VERSION) + " (commit " + ANNEAL_GIT_COMMIT + ")"},
          {"config", config.is_discarded() ? json(lineage.config_json) : config},
          {"dataset",
           {{"dir", lineage.dataset_dir}, {"inputs_hash", lineage.dataset_hash},
            {"tokenizer", lineage.dataset_tokenizer}}}}},
        {"layout", layout},
        {"model", ModelJson(c)},
        {"tensors", tensors},
        {"trainer",
         {{"step", state.step},
          {"updates", state.updates},
          {"bad_steps", state.bad_steps},
          {"skipped_total", state.skipped_total},
          {"loader", {{"seed", state.loader.seed}, {"samples", state.loader.samples}}},
          {"optimizer", t.schedule ? json{{"lr", t.schedule->lr},
                                          {"min_lr", t.schedule->min_lr},
                                          {"warmup_steps", t.schedule->warmup_steps},
                                          {"decay_steps", t.schedule->decay_steps}}
                                  : json()}}}};
    snap.manifest = manifest.dump();
  }
  return snap;
}

namespace {

std::string RecordKey(const CheckpointSnapshot& s, int rank) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "done-%05d.json", rank);
  return s.name + "/attempt-" + std::to_string(s.attempt) + "/" + buf;
}

// Retention: keep the newest keep_last complete checkpoints and every keep_every-th step; delete the
// other complete ones and every incomplete one older than the newest complete.
Status ApplyRetention(ObjectStore& store, const CheckpointOptions& o) {
  if (o.keep_last <= 0) return Status::Ok();
  ANNEAL_ASSIGN_OR_RETURN(auto all, ListCheckpoints(store));
  std::vector<int> complete;
  for (const auto& c : all) {
    if (c.complete) complete.push_back(c.step);
  }
  std::sort(complete.rbegin(), complete.rend());
  if (complete.empty()) return Status::Ok();
  for (const auto& c : all) {
    bool keep = c.step >= complete.front();
    if (c.complete) {
      const auto pos = std::find(complete.begin(), complete.end(), c.step) - complete.begin();
      keep = pos < o.keep_last || (o.keep_every > 0 && c.step % o.keep_every == 0);
    }
    if (!keep) ANNEAL_RETURN_IF_ERROR(DeleteCheckpoint(store, c.name));
  }
  return Status::Ok();
}

}  // namespace

namespace {

std::string StagedKey(const CheckpointSnapshot& s, int rank) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "staged-%05d.json", rank);
  return s.name + "/attempt-" + std::to_string(s.attempt) + "/" + buf;
}

// The node leader's part of a hierarchical upload: every other local rank's staged files go to the
// store, then their records (so rank 0 commits only once they are there), and the staging is cleared.
Status UploadStaged(ObjectStore& store, const CheckpointSnapshot& snap, const CheckpointOptions& o) {
  const double deadline = o.clock->Monotonic() + o.wait_s;
  const std::string prefix = snap.name + "/attempt-" + std::to_string(snap.attempt) + "/staged-";
  std::set<std::string> done;
  while (static_cast<int>(done.size()) < o.local_world - 1) {
    ANNEAL_ASSIGN_OR_RETURN(auto staged, o.staging->ListAll(prefix));
    bool any = false;
    for (const ObjectInfo& m : staged) {
      if (done.count(m.key)) continue;
      any = true;
      ANNEAL_ASSIGN_OR_RETURN(std::string text, o.staging->Get(m.key));
      json staged_record = json::parse(text, nullptr, false);
      if (!staged_record.is_object()) return Internal("staged record " + m.key + " is corrupt");
      for (const auto& f : staged_record.at("files")) {
        const std::string key = snap.name + "/" + f.at("name").get<std::string>();
        ANNEAL_ASSIGN_OR_RETURN(std::string image, o.staging->Get(key));
        ANNEAL_RETURN_IF_ERROR(store.Put(key, image));
        ANNEAL_RETURN_IF_ERROR(o.staging->Delete(key));
      }
      ANNEAL_RETURN_IF_ERROR(store.Put(staged_record.at("record_key").get<std::string>(), staged_record.at("files").dump()));
      ANNEAL_RETURN_IF_ERROR(o.staging->Delete(m.key));
      done.insert(m.key);
    }
    if (!any) {
      if (o.clock->Monotonic() > deadline) {
        return PeerError("checkpoint " + snap.name + ": " + std::to_string(o.local_world - 1 - done.size()) +
                         " local rank(s) did not hand over their files within " +
                         std::to_string(static_cast<int>(o.wait_s)) + " s");
      }
      o.clock->SleepFor(0.01);
    }
  }
  return Status::Ok();
}

}  // namespace

Status WriteSnapshot(ObjectStore& store, const CheckpointSnapshot& snap, const CheckpointOptions& o) {
  if (snap.skip) return Status::Ok();
  const bool hierarchical = o.staging && o.local_world > 1;
  if (hierarchical && o.local_rank != 0) {
    // Hand the files to the node leader: into node-local staging, then the staged record (last).
    json files = json::array();
    for (const auto& [name, image] : snap.files) {
      ANNEAL_RETURN_IF_ERROR(o.staging->Put(snap.name + "/" + name, image));
      files.push_back({{"name", name}, {"bytes", image.size()}, {"xxh64", HexU64(Xxh64(image))}});
    }
    json staged = {{"files", files}, {"record_key", RecordKey(snap, snap.rank)}};
    return o.staging->Put(StagedKey(snap, snap.rank), staged.dump());
  }
  json record = json::array();
  for (const auto& [name, image] : snap.files) {
    ANNEAL_RETURN_IF_ERROR(store.Put(snap.name + "/" + name, image));
    record.push_back({{"name", name}, {"bytes", image.size()}, {"xxh64", HexU64(Xxh64(image))}});
  }
  ANNEAL_RETURN_IF_ERROR(store.Put(RecordKey(snap, snap.rank), record.dump()));
  if (hierarchical) ANNEAL_RETURN_IF_ERROR(UploadStaged(store, snap, o));
  if (snap.rank != 0) return Status::Ok();
  // Rank 0: every rank's record (they arrive through the store, from ranks writing in parallel).
  json files = json::array();
  const double deadline = o.clock->Monotonic() + o.wait_s;
  for (int r = 0; r < snap.ranks; ++r) {
    for (;;) {
      auto text = store.Get(RecordKey(snap, r));
      if (text.ok()) {
        json rec = json::parse(*text, nullptr, false);
        if (!rec.is_array()) return Internal("checkpoint " + snap.name + ": rank " + std::to_string(r) + "'s record is corrupt");
        for (auto& f : rec) files.push_back(f);
        break;
      }
      if (text.status().code() != Code::kNotFound) return text.status();
      if (o.clock->Monotonic() > deadline) {
        return PeerError("checkpoint " + snap.name + " in " + store.Describe() + ": rank " + std::to_string(r) +
                         " did not finish writing its files within " + std::to_string(static_cast<int>(o.wait_s)) +
                         " s; the checkpoint was not committed (the previous one stays the newest)");
      }
      o.clock->SleepFor(0.02);
    }
  }
  json manifest = json::parse(snap.manifest);
  manifest["files"] = files;
  // The manifest last: until it is there, this checkpoint does not exist.
  ANNEAL_RETURN_IF_ERROR(store.Put(snap.name + "/manifest.json", manifest.dump(1) + "\n"));
  return ApplyRetention(store, o);
}

Status SaveCheckpoint(ObjectStore& store, const CheckpointTensors& t, const TrainerState& state,
                      const CheckpointLineage& lineage, const CheckpointWriters& writers, const CheckpointOptions& o) {
  ANNEAL_ASSIGN_OR_RETURN(CheckpointSnapshot snap, SnapshotCheckpoint(store, t, state, lineage, writers, o, nullptr));
  return WriteSnapshot(store, snap, o);
}

AsyncCheckpointer::~AsyncCheckpointer() { (void)Wait(); }

Status AsyncCheckpointer::Wait() {
  if (thread_.joinable()) thread_.join();
  for (auto& f : done_.files) spare_.push_back(std::move(f.second));  // reused by the next snapshot
  done_.files.clear();
  Status s = status_;
  status_ = Status::Ok();
  return s;
}

Status AsyncCheckpointer::Start(CheckpointSnapshot snap) {
  ANNEAL_RETURN_IF_ERROR(Wait());
  done_ = std::move(snap);
  thread_ = std::thread([this] {
    trace::NameThisThread("checkpoint writer");
    trace::Span span("checkpoint", "checkpoint write");
    const double t0 = o_.clock->Monotonic();
    status_ = FinishSnapshot(&done_);
    if (status_.ok()) status_ = WriteSnapshot(*store_, done_, o_);
    write_s_ = o_.clock->Monotonic() - t0;
  });
  return Status::Ok();
}

Result<std::vector<CheckpointListing>> ListCheckpoints(ObjectStore& store) {
  ANNEAL_ASSIGN_OR_RETURN(auto objects, store.ListAll("step-"));
  std::map<std::string, CheckpointListing> by_name;
  for (const ObjectInfo& o : objects) {
    const size_t slash = o.key.find('/');
    if (slash == std::string::npos) continue;
    const std::string name = o.key.substr(0, slash);
    if (StepOf(name) < 0) continue;
    CheckpointListing& l = by_name[name];
    l.name = name;
    l.step = StepOf(name);
    l.bytes += o.size;
    ++l.objects;
    if (o.key == name + "/manifest.json") l.complete = true;
  }
  std::vector<CheckpointListing> out;
  for (auto& [name, l] : by_name) {
    if (l.complete) {
      auto m = ReadManifest(store, name);
      if (m.ok()) l.attempt = m->value("attempt", -1);
      else l.complete = false;  // an unreadable manifest: not a checkpoint
    }
    out.push_back(l);
  }
  return out;  // by step (names sort by step)
}

Result<std::optional<std::string>> FindNewestCheckpoint(ObjectStore& store) {
  ANNEAL_ASSIGN_OR_RETURN(auto all, ListCheckpoints(store));
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    if (it->complete) return std::optional<std::string>(it->name);
  }
  return std::optional<std::string>();
}

Status DeleteCheckpoint(ObjectStore& store, const std::string& name) {
  if (StepOf(name) < 0) return InvalidInput("'" + name + "' is not a checkpoint name (step-NNNNNNNN)");
  ANNEAL_RETURN_IF_ERROR(store.Delete(name + "/manifest.json"));
  ANNEAL_ASSIGN_OR_RETURN(auto objects, store.ListAll(name + "/"));
  for (const ObjectInfo& o : objects) ANNEAL_RETURN_IF_ERROR(store.Delete(o.key));
  return Status::Ok();
}

Status LoadWeights(ObjectStore& store, const std::string& name, CheckpointTensors t) {
  t.m = t.v = DevPtr{};  // the weights alone: the optimizer starts fresh
  t.schedule.reset();
  t.set_updates = nullptr;
  return LoadCheckpoint(store, name, t, nullptr);
}

Status LoadWeights(const ModelConfig& source, const std::vector<float>& whole, const CheckpointTensors& t,
                   const std::string& what) {
  if (ModelJson(source) != ModelJson(*t.model)) {
    return InvalidInput(what + " holds a model of shape " + ModelJson(source).dump() + " but this run's model is " +
                        ModelJson(*t.model).dump() + ": give the model keys of " + what);
  }
  const ParamLayout src(source);
  HostWrite params(*t.backend, t.params, t.param_floats());
  const size_t b = t.param_begin(), e = b + t.param_floats();
  std::vector<float> local;  // one tensor, when only part of it is this rank's (ZeRO-3)
  for (const ParamInfo& p : t.layout->params()) {
    const ParamInfo* s = src.Find(p.name);
    if (!s) return Internal("tensor " + p.name + " missing from the source layout");
    const size_t lo = std::max(b, p.offset), hi = std::min(e, p.offset + p.stored_size);
    if (lo >= hi) continue;
    local.assign(p.stored_size, 0.0f);  // vocabulary padding stays zero
    CopyOverlap(MakeBoxPart(std::vector<int64_t>(s->shape.size(), 0), s->shape), whole.data() + s->offset,
                MakeBoxPart(p.box_offset, p.box_length), local.data());
    std::copy(local.begin() + (lo - p.offset), local.begin() + (hi - p.offset), params.data() + (lo - b));
  }
  params.Commit();
  if (t.loaded) t.loaded();
  return Status::Ok();
}

Result<CheckpointRef> ResolveCheckpoint(const std::string& path) {
  std::string where = path, name;
  while (where.size() > 1 && where.back() == '/') where.pop_back();
  const size_t slash = where.rfind('/');
  const std::string base = slash == std::string::npos ? where : where.substr(slash + 1);
  if (base.size() == 13 && base.rfind("step-", 0) == 0) {
    name = base;
    where = slash == std::string::npos ? "." : where.substr(0, slash);
  }
  CheckpointRef ref;
  ANNEAL_ASSIGN_OR_RETURN(ref.store, OpenCheckpointStore(where));
  if (name.empty()) {
    ANNEAL_ASSIGN_OR_RETURN(auto newest, FindNewestCheckpoint(*ref.store));
    if (!newest) {
      return InvalidInput("no complete checkpoint at " + path + ": give a step-NNNNNNNN folder with "
                          "manifest.json, or the train.checkpoint_dir of a run");
    }
    name = *newest;
  }
  ref.name = name;
  return ref;
}

Result<ModelConfig> ReadCheckpointModelConfig(ObjectStore& store, const std::string& name) {
  ANNEAL_ASSIGN_OR_RETURN(json m, ReadManifest(store, name));
  try {
    const json& j = m.at("model");
    return ModelFromJson(j);
  } catch (const std::exception& e) {
    return InvalidInput("checkpoint " + name + ": manifest has no valid \"model\" section (" + e.what() + ")");
  }
}

Result<std::string> TokenizerOfCheckpoint(const std::string& given, ObjectStore& store, const std::string& name) {
  if (!given.empty()) return given;
  ANNEAL_ASSIGN_OR_RETURN(json m, ReadManifest(store, name));
  const json* t = &m;
  for (const char* k : {"lineage", "dataset", "tokenizer"}) {
    if (!t->is_object() || !t->contains(k)) return std::string("gpt2");
    t = &(*t)[k];
  }
  return t->is_string() && !t->get<std::string>().empty() ? t->get<std::string>() : std::string("gpt2");
}

Status VerifyCheckpoint(ObjectStore& store, const std::string& name) {
  ANNEAL_ASSIGN_OR_RETURN(json m, ReadManifest(store, name));
  std::vector<std::string> problems;
  std::map<std::string, std::unique_ptr<SafeTensorsReader>> readers;
  try {
    for (const auto& f : m.at("files")) {
      const std::string file = f.at("name"), key = name + "/" + file;
      auto bytes = store.Get(key);
      if (!bytes.ok()) {
        problems.push_back(file + ": " + bytes.status().message());
        continue;
      }
      if (bytes->size() != f.at("bytes").get<uint64_t>()) {
        problems.push_back(file + ": " + std::to_string(bytes->size()) + " bytes, the manifest says " + f.at("bytes").dump());
        continue;
      }
      if (HexU64(Xxh64(*bytes)) != f.at("xxh64").get<std::string>()) {
        problems.push_back(file + ": fails its checksum");
        continue;
      }
      auto r = SafeTensorsReader::FromBytes(std::move(*bytes), key);
      if (!r.ok()) problems.push_back(r.status().message());
      else readers[file] = std::move(r).value();
    }
    // Every tensor: its parts exist in their files with the right size, and cover it exactly once.
    for (auto it = m.at("tensors").begin(); it != m.at("tensors").end(); ++it) {
      const std::vector<int64_t> shape = it.value().at("shape").get<std::vector<int64_t>>();
      int64_t total = 1;
      for (int64_t d : shape) total *= d;
      std::vector<uint8_t> seen(static_cast<size_t>(total), 0);
      const BoxPart whole = MakeBoxPart(std::vector<int64_t>(shape.size(), 0), shape);
      for (const auto& part : it.value().at("parts")) {
        std::vector<int64_t> off(shape.size(), 0), len = shape;
        if (part.contains("box")) {
          off = part.at("box").at("offset").get<std::vector<int64_t>>();
          len = part.at("box").at("length").get<std::vector<int64_t>>();
        }
        int64_t start = 0, count = -1;
        if (part.contains("range")) start = part.at("range")[0], count = part.at("range")[1];
        const BoxPart b = MakeBoxPart(off, len, start, count);
        const std::string file = part.at("file");
        auto r = readers.find(file);
        if (r == readers.end()) continue;  // reported above
        auto e = r->second->tensors().find(it.key());
        if (e == r->second->tensors().end() || static_cast<int64_t>(e->second.numel()) != b.elements()) {
          problems.push_back(it.key() + ": missing or of the wrong size in " + file);
          continue;
        }
        // Mark the elements this part covers (a copy of ones into the coverage map, as counts).
        std::vector<float> ones(static_cast<size_t>(b.elements()), 1.0f), cover(static_cast<size_t>(total), 0.0f);
        CopyOverlap(b, ones.data(), whole, cover.data());
        for (size_t i = 0; i < cover.size(); ++i) seen[i] += cover[i] > 0;
      }
      size_t missing = 0, twice = 0;
      for (uint8_t v : seen) missing += v == 0, twice += v > 1;
      if (missing || twice) {
        problems.push_back(it.key() + ": " + std::to_string(missing) + " elements not covered, " + std::to_string(twice) +
                           " covered more than once");
      }
    }
  } catch (const std::exception& e) {
    problems.push_back(std::string("the manifest is malformed: ") + e.what());
  }
  if (problems.empty()) return Status::Ok();
  std::string msg = "checkpoint " + name + " in " + store.Describe() + " is damaged:";
  for (const auto& p : problems) msg += "\n  " + p;
  return InvalidInput(msg + "\ndelete it (anneal ckpt rm) to resume from the previous one");
}

namespace {

// One checkpoint's tensors, read part by part: files are fetched (and their size and checksum
// verified) the first time a needed part is in them.
class CheckpointParts {
 public:
  CheckpointParts(ObjectStore& store, std::string ckpt, const json& manifest)
      : store_(store), ckpt_(std::move(ckpt)), m_(manifest), v1_(manifest.at("version") == 1) {
    for (const auto& f : m_.at("files")) file_info_[f.at("name").get<std::string>()] = f;
  }

  Status Corrupt(const std::string& what) const {
    return InvalidInput("checkpoint " + ckpt_ + " in " + store_.Describe() + ": " + what +
                        ": the checkpoint is corrupt; delete it (anneal ckpt rm) to resume from the previous one");
  }

  // [lo, hi) of the flat buffer of tensor `key` into dst: the box's elements there, padding rows zero.
  Status FillRange(const std::string& key, const ParamInfo& p, size_t lo, size_t hi, float* dst) {
    std::fill(dst, dst + (hi - lo), 0.0f);
    const size_t a = lo - p.offset, b = std::min(hi - p.offset, p.size);
    if (a >= b) return Status::Ok();
    if (a == 0 && b == p.size) return Fill(key, p, MakeBoxPart(p.box_offset, p.box_length), dst);  // the whole box
    const BoxPart want = MakeBoxPart(p.box_offset, p.box_length, static_cast<int64_t>(a), static_cast<int64_t>(b - a));
    return Fill(key, p, want, dst);
  }

 private:
  // A part of a tensor: a box of it and a range of the box's elements; version 1 kept one whole
  // tensor per entry, and a part with a range but no box is a range of the whole tensor.
  struct Part {
    std::string file;
    BoxPart box;
  };

  Result<SafeTensorsReader*> Reader(const std::string& name) {
    if (auto it = readers_.find(name); it != readers_.end()) return it->second.get();
    if (!file_info_.count(name)) return Corrupt("file " + name + " is not listed in the manifest");
    const std::string key = ckpt_ + "/" + name;
    auto bytes = store_.Get(key);
    if (!bytes.ok() && bytes.status().code() != Code::kNotFound) return bytes.status();
    if (!bytes.ok() || bytes->size() != file_info_[name].at("bytes").get<uint64_t>()) {
      return Corrupt("file " + key + " is missing or has the wrong size");
    }
    if (HexU64(Xxh64(*bytes)) != file_info_[name].at("xxh64").get<std::string>()) {
      return Corrupt("file " + key + " fails its checksum");
    }
    ANNEAL_ASSIGN_OR_RETURN(auto r, SafeTensorsReader::FromBytes(std::move(bytes).value(), key));
    return (readers_[name] = std::move(r)).get();
  }

  Result<std::vector<Part>> PartsOf(const std::string& key, const ParamInfo& p) const {
    const json& t = m_.at("tensors").value(key, json());
    if (t.is_null()) return Corrupt("tensor " + key + " is missing from the manifest");
    std::vector<Part> out;
    const json parts = v1_ ? json::array({t}) : t.at("parts");
    try {
      for (const json& part : parts) {
        std::vector<int64_t> off(p.shape.size(), 0), len = p.shape;
        if (part.contains("box")) {
          off = part.at("box").at("offset").get<std::vector<int64_t>>();
          len = part.at("box").at("length").get<std::vector<int64_t>>();
        }
        if (off.size() != p.shape.size() || len.size() != p.shape.size()) {
          return Corrupt("a part of " + key + " has a box of the wrong rank");
        }
        int64_t start = 0, count = -1;
        if (part.contains("range")) {
          start = part.at("range")[0];
          count = part.at("range")[1];
        }
        out.push_back({part.at("file"), MakeBoxPart(off, len, start, count)});
      }
    } catch (const std::exception& e) {
      return Corrupt(std::string("a part of ") + key + " is malformed (" + e.what() + ")");
    }
    return out;
  }

  // Fills dst with the elements of `want` (a part of tensor `key`) from whichever stored parts hold them.
  Status Fill(const std::string& key, const ParamInfo& p, const BoxPart& want, float* dst) {
    ANNEAL_ASSIGN_OR_RETURN(std::vector<Part> parts, PartsOf(key, p));
    size_t covered = 0;
    for (const Part& part : parts) {
      if (CopyOverlap(part.box, nullptr, want, nullptr, /*count_only=*/true) == 0) continue;
      ANNEAL_ASSIGN_OR_RETURN(SafeTensorsReader * r, Reader(part.file));
      ANNEAL_ASSIGN_OR_RETURN(std::vector<float> v, r->ReadF32(key));
      if (static_cast<int64_t>(v.size()) != part.box.elements()) {
        return Corrupt("tensor " + key + " in " + part.file + " has the wrong size");
      }
      covered += CopyOverlap(part.box, v.data(), want, dst);
    }
    if (covered != static_cast<size_t>(want.elements())) {
      return Corrupt("its parts of " + key + " cover " + std::to_string(covered) + " of the " +
                     std::to_string(want.elements()) + " elements needed");
    }
    return Status::Ok();
  }

  ObjectStore& store_;
  const std::string ckpt_;
  const json& m_;
  const bool v1_;
  std::map<std::string, json> file_info_;
  std::map<std::string, std::unique_ptr<SafeTensorsReader>> readers_;
};

// The optimizer's moments of this rank's range, from the checkpoint's opt.m.* and opt.v.*.
Status LoadMoments(CheckpointParts& parts, const json& m, const std::string& ckpt, const CheckpointTensors& ts) {
  if (!m.at("tensors").contains("opt.m.wte.weight")) {
    return InvalidInput("checkpoint " + ckpt + " holds no optimizer state (weights only)");
  }
  for (const char* which : {"m", "v"}) {
    HostWrite mom(*ts.backend, which[0] == 'm' ? ts.m : ts.v, ts.moment_floats());
    for (const ParamInfo& p : ts.layout->params()) {
      const size_t lo = std::max(ts.begin, p.offset), hi = std::min(ts.end, p.offset + p.stored_size);
      if (lo < hi) {
        ANNEAL_RETURN_IF_ERROR(parts.FillRange(std::string("opt.") + which + "." + p.name, p, lo, hi, mom.data() + (lo - ts.begin)));
      }
    }
    mom.Commit();
  }
  return Status::Ok();
}

void LoadTrainerState(const json& m, const CheckpointTensors& ts, TrainerState* state) {
  const json& t = m.at("trainer");
  state->step = t.at("step");
  state->updates = t.at("updates");
  state->bad_steps = t.at("bad_steps");
  state->skipped_total = t.at("skipped_total");
  state->loader.seed = t.at("loader").at("seed");
  state->loader.samples = t.at("loader").at("samples");
  if (ts.set_updates) ts.set_updates(state->updates);
}

}  // namespace

Status LoadCheckpoint(ObjectStore& store, const std::string& ckpt, const CheckpointTensors& ts, TrainerState* state) {
  ANNEAL_ASSIGN_OR_RETURN(json m, ReadManifest(store, ckpt));
  const ModelConfig& c = *ts.model;
  if (m.value("model", json()) != ModelJson(c)) {
    return InvalidInput("checkpoint " + ckpt + " holds a model of shape " + m.value("model", json()).dump() +
                        " but this run's model is " + ModelJson(c).dump() +
                        ": use the checkpoint's model settings, or another checkpoint_dir");
  }
  CheckpointParts parts(store, ckpt, m);
  // Into the canonical parameters (fp32 masters where the optimizer keeps them; else the model's,
  // rounded to its compute dtype), then the working copy from the masters.
  HostWrite params(*ts.backend, ts.params, ts.param_floats());
  const size_t pb = ts.param_begin(), pe = pb + ts.param_floats();
  for (const ParamInfo& p : ts.layout->params()) {
    const size_t lo = std::max(pb, p.offset), hi = std::min(pe, p.offset + p.stored_size);
    if (lo < hi) ANNEAL_RETURN_IF_ERROR(parts.FillRange("param." + p.name, p, lo, hi, params.data() + (lo - pb)));
  }
  params.Commit();
  if (ts.loaded) ts.loaded();
  if (ts.has_optimizer()) ANNEAL_RETURN_IF_ERROR(LoadMoments(parts, m, ckpt, ts));
  if (state) LoadTrainerState(m, ts, state);
  return Status::Ok();
}

}  // namespace anneal
