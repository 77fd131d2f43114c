#include "ckpt/checkpoint.h"

#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "anneal_version.h"
#include "core/checksum.h"
#include "core/safetensors.h"

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
  if (m.value("version", 0) != kCheckpointVersion) {
    return InvalidInput("checkpoint " + ckpt + " has manifest version " + m.value("version", json()).dump() +
                        "; this anneal reads version 1");
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
                      const TrainerState& state, const CheckpointLineage& lineage) {
  const std::string ckpt = JoinPath(dir, CheckpointName(state.step));
  if (env.Exists(JoinPath(ckpt, "manifest.json")) && ReadManifest(env, ckpt).ok()) return Status::Ok();
  ANNEAL_RETURN_IF_ERROR(env.CreateDirs(ckpt));
  const GptConfig& c = model.config();
  SafeTensorsWriter w;
  json tensors = json::object();
  auto add = [&](const std::string& prefix, const ParamInfo& p, const float* base) {
    // Canonical shape: for wte the first V of Vp rows (row-major, so a prefix of the buffer).
    w.AddF32(prefix + p.name, p.shape, base + p.offset);
    json box = {{"offset", std::vector<int64_t>(p.shape.size(), 0)}, {"length", p.shape}};
    tensors[prefix + p.name] = {{"file", kShardFile}, {"shape", p.shape}, {"box", box}};
  };
  for (const ParamInfo& p : model.layout().params()) add("param.", p, model.params());
  if (opt) {
    for (const ParamInfo& p : model.layout().params()) add("opt.m.", p, opt->m().data());
    for (const ParamInfo& p : model.layout().params()) add("opt.v.", p, opt->v().data());
  }
  w.SetMetadata("format", kCheckpointFormat);
  std::string image = w.Serialize();
  const uint64_t sum = Xxh64(image);
  ANNEAL_RETURN_IF_ERROR(env.WriteFileAtomic(JoinPath(ckpt, kShardFile), image));
  // Fault injection for the resume test (tests/e2e/resume_test.sh): die like kill -9 between the
  // shard and the manifest of step N, the moment a torn checkpoint would be most tempting to trust.
  if (const char* f = std::getenv("ANNEAL_FAULT_KILL_IN_CHECKPOINT"); f && std::atoi(f) == state.step) {
    ::raise(SIGKILL);
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
      {"layout", {{"dp", 1}, {"tp", 1}, {"pp", 1}, {"zero", 0}, {"ranks", 1}}},
      {"model", ModelJson(c)},
      {"files", json::array({{{"name", kShardFile}, {"bytes", image.size()}, {"xxh64", HexU64(sum)}}})},
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
  return env.WriteFileAtomic(JoinPath(ckpt, "manifest.json"), manifest.dump(1) + "\n");
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
  for (const auto& f : m.at("files")) {
    std::string path = JoinPath(ckpt, f.at("name").get<std::string>());
    auto size = env.FileSize(path);
    if (!size.ok() || *size != f.at("bytes").get<uint64_t>()) {
      return InvalidInput("checkpoint file " + path + " is missing or has the wrong size: the checkpoint is corrupt; "
                          "delete " + ckpt + " to resume from the previous one");
    }
    // Checksum the mapped file (no copy: a shard is as large as the model state).
    ANNEAL_ASSIGN_OR_RETURN(auto map, env.Map(path, Env::MapMode::kLazy));
    if (HexU64(Xxh64(std::string_view(map->data(), map->size()))) != f.at("xxh64").get<std::string>()) {
      return InvalidInput("checkpoint file " + path + " fails its checksum: the checkpoint is corrupt; delete " + ckpt +
                          " to resume from the previous one");
    }
  }
  ANNEAL_ASSIGN_OR_RETURN(auto r, SafeTensorsReader::Open(env, JoinPath(ckpt, kShardFile)));
  auto load = [&](const std::string& prefix, float* base) -> Status {
    for (const ParamInfo& p : model->layout().params()) {
      ANNEAL_ASSIGN_OR_RETURN(std::vector<float> v, r->ReadF32(prefix + p.name));
      if (v.size() != p.size) return InvalidInput("checkpoint " + ckpt + ": tensor " + prefix + p.name + " has the wrong size");
      std::copy(v.begin(), v.end(), base + p.offset);
      std::fill(base + p.offset + p.size, base + p.offset + p.stored_size, 0.0f);  // vocabulary padding
    }
    return Status::Ok();
  };
  ANNEAL_RETURN_IF_ERROR(load("param.", model->params()));
  if (opt) {
    if (!r->Has("opt.m.wte.weight")) return InvalidInput("checkpoint " + ckpt + " holds no optimizer state (weights only)");
    ANNEAL_RETURN_IF_ERROR(load("opt.m.", opt->m().data()));
    ANNEAL_RETURN_IF_ERROR(load("opt.v.", opt->v().data()));
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
