#include "train/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "core/env.h"
#include "kernels/registry.h"

namespace anneal {

namespace {

// A key, its default as text, and how to store a parsed value.
struct KeySpec {
  const char* key;
  const char* def;
  const char* help;
};

const KeySpec kSpecs[] = {
    {"model.preset", "", "gpt2 | gpt2-medium | gpt2-large | gpt2-xl; overrides the shape keys"},
    {"model.vocab_size", "50257", "tokens in the vocabulary (the dataset's)"},
    {"model.max_seq_len", "256", "rows of the position embedding"},
    {"model.n_layer", "4", "transformer blocks"},
    {"model.n_head", "4", "attention heads (must divide n_embd)"},
    {"model.n_embd", "256", "channels"},
    {"data.dir", "", "prepared dataset (anneal prep --output): a folder, or with data.mode file a URI (s3://, file://)"},
    {"data.mode", "shared",
     "shared: read data.dir in place (a local or mounted folder) | file: copy it to local disk first, checksummed | "
     "fastfile: read it during training by range reads with read-ahead, no copy"},
    {"data.local_dir", "", "data.mode file: where the copy goes (empty = /tmp/anneal-channels/<hash of data.dir>)"},
    {"data.parallel", "4", "data.mode file: objects copied at once"},
    {"data.seq_len", "256", "T: tokens per sample"},
    {"data.batch_size", "8", "B: samples per micro-batch"},
    {"data.seed", "1", "shuffle seed"},
    {"data.verify_checksums", "true", "check shard checksums at start"},
    {"optim.lr", "6e-4", "peak learning rate"},
    {"optim.min_lr", "6e-5", "learning rate at the end of the cosine"},
    {"optim.warmup_steps", "10", "linear warmup steps"},
    {"optim.decay_steps", "0", "end of the cosine decay (0 = train.steps)"},
    {"optim.weight_decay", "0.1", "decoupled weight decay on 2-D tensors"},
    {"optim.beta1", "0.9", "Adam beta1"},
    {"optim.beta2", "0.95", "Adam beta2"},
    {"optim.eps", "1e-8", "Adam epsilon"},
    {"optim.grad_clip", "1.0", "global gradient-norm clip (0 = off)"},
    {"train.steps", "100", "optimizer steps"},
    {"train.grad_accum", "1", "micro-batches per step"},
    {"train.log_every", "1", "steps between log lines"},
    {"train.eval_every", "0", "steps between validation losses (0 = at the end)"},
    {"train.eval_batches", "8", "validation micro-batches per evaluation"},
    {"train.checkpoint_every", "0", "steps between checkpoints (0 = at the end)"},
    {"train.checkpoint_dir", "",
     "where step-NNNNNNNN/ checkpoints go: a folder, file:///dir or s3://bucket/prefix (empty = none)"},
    {"train.checkpoint_async", "true",
     "snapshot to memory and write on a background thread while training goes on (false: wait for each save)"},
    {"train.checkpoint_hierarchical", "false",
     "the ranks of one instance hand their checkpoint files to local rank 0, which alone uploads them"},
    {"train.checkpoint_staging_dir", "/dev/shm",
     "with checkpoint_hierarchical: the node-local folder (memory-backed is best) where the hand-over folder "
     "anneal-staging-<hash of job and checkpoint_dir> is made"},
    {"train.checkpoint_keep", "0", "keep the newest K complete checkpoints, deleting older ones (0 = keep all)"},
    {"train.checkpoint_keep_every", "0", "with checkpoint_keep: also keep every checkpoint whose step is a multiple of M"},
    {"train.resume", "auto", "auto: continue from the newest complete checkpoint; none: start fresh"},
    {"train.max_bad_steps", "5", "non-finite steps in a row that stop the run"},
    {"train.seed", "1234", "weight-initialization seed"},
    {"train.kernels", "cpu", "cpu | ref"},
    {"train.dtype", "f32",
     "f32 | bf16: parameters, gradients and activations (bf16: fp32 master weights in the optimizer, checkpoints in "
     "fp32; needs a backend with bf16 ops — ref emulates them — and, for now, one rank)"},
    {"train.recompute", "none",
     "activation recomputation: none | selective (GELU recomputed in backward) | full (each layer's forward "
     "recomputed in backward; only layer outputs kept)"},
    {"train.threads", "0", "OpenMP threads (0 = OMP_NUM_THREADS or all cores)"},
    {"train.max_seconds", "0", "stop with a checkpoint after this long (0 = no limit)"},
    {"train.peak_gflops", "0", "peak GFLOP/s for MFU (0 = measure sgemm at start)"},
    {"dist.dp", "0", "data-parallel ranks (0 = the world size / (tp x pp))"},
    {"dist.tp", "1", "tensor-parallel ranks"},
    {"dist.pp", "1", "pipeline stages"},
    {"dist.sequence_parallel", "false",
     "with dist.tp > 1: keep LayerNorms and residual adds on 1/tp of the positions each (reduce-scatter and "
     "all-gather instead of allreduce; less activation memory)"},
    {"dist.schedule", "1f1b",
     "pipeline schedule over the micro-batches (train.grad_accum): 1f1b (one forward, one backward; at most pp "
     "micro-batches in flight) | gpipe (all forwards, then all backwards)"},
    {"dist.zero", "0", "ZeRO stage: 0 replicated optimizer; 1 sharded optimizer state; 2 sharded gradients too"},
    {"dist.bucket_mb", "4", "gradient bucket size for the overlapped communication, MB"},
    {"dist.timeout_s", "300", "every collective's timeout: a lost rank fails the run after this long (exit 3)"},
};

void Flatten(const YAML::Node& n, const std::string& prefix, std::map<std::string, std::string>* out,
             std::vector<std::string>* errors) {
  if (n.IsMap()) {
    for (const auto& kv : n) Flatten(kv.second, prefix.empty() ? kv.first.as<std::string>() : prefix + "." + kv.first.as<std::string>(), out, errors);
  } else if (n.IsScalar()) {
    (*out)[prefix] = n.as<std::string>();
  } else if (n.IsNull()) {
    (*out)[prefix] = "";
  } else {
    errors->push_back(prefix + " must be a single value");
  }
}

std::string Closest(const std::string& key) {
  std::string best;
  size_t bd = SIZE_MAX;
  for (const auto& s : kSpecs) {
    size_t d = EditDistance(key, s.key);
    // The same name under a misspelt or wrong section also counts as close.
    const std::string spec = s.key, name = spec.substr(spec.find('.') + 1);
    const size_t dot = key.find('.');
    if (dot != std::string::npos && key.substr(dot + 1) == name) d = std::min(d, size_t{1});
    if (d < bd) {
      bd = d;
      best = s.key;
    }
  }
  return best;
}

}  // namespace

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::vector<std::string> TrainConfig::Keys() {
  std::vector<std::string> k;
  for (const auto& s : kSpecs) k.push_back(std::string(s.key) + " (default " + (*s.def ? s.def : "\"\"") + "): " + s.help);
  return k;
}

Result<TrainConfig> TrainConfig::Load(const std::string& path, const std::vector<std::string>& overrides) {
  auto text = Env::Default().ReadFile(path);
  if (!text.ok()) return InvalidInput("config " + path + ": " + text.status().message());
  return Parse(*text, overrides, path);
}

Result<TrainConfig> TrainConfig::Parse(const std::string& yaml_text, const std::vector<std::string>& overrides,
                                       const std::string& where) {
  std::map<std::string, std::string> given;
  std::vector<std::string> errors;
  try {
    YAML::Node root = YAML::Load(yaml_text);
    if (!root.IsNull() && !root.IsMap()) return InvalidInput(where + ": a config is a YAML mapping of sections");
    if (!root.IsNull()) Flatten(root, "", &given, &errors);
  } catch (const YAML::Exception& e) {
    return InvalidInput(where + ": YAML error at line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  for (const auto& o : overrides) {
    size_t eq = o.find('=');
    if (eq == std::string::npos || eq == 0) {
      errors.push_back("--set " + o + " must look like section.key=value");
      continue;
    }
    given[o.substr(0, eq)] = o.substr(eq + 1);
  }
  std::map<std::string, std::string> v;
  for (const auto& s : kSpecs) v[s.key] = s.def;
  for (const auto& [k, val] : given) {
    if (!v.count(k)) {
      errors.push_back("unknown key '" + k + "' (did you mean '" + Closest(k) + "'?)");
      continue;
    }
    v[k] = val;
  }
  TrainConfig c;
  auto get_int = [&](const std::string& k, int lo, int hi) -> int {
    try {
      size_t pos;
      long long x = std::stoll(v[k], &pos);
      if (pos != v[k].size() || x < lo || x > hi) throw std::out_of_range("");
      return static_cast<int>(x);
    } catch (...) {
      errors.push_back(k + " = '" + v[k] + "' must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
      return lo;
    }
  };
  auto get_double = [&](const std::string& k, double lo, double hi) -> double {
    try {
      size_t pos;
      double x = std::stod(v[k], &pos);
      if (pos != v[k].size() || !(x >= lo && x <= hi)) throw std::out_of_range("");
      return x;
    } catch (...) {
      errors.push_back(k + " = '" + v[k] + "' must be a number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
      return lo;
    }
  };
  auto get_bool = [&](const std::string& k) -> bool {
    if (v[k] == "true") return true;
    if (v[k] == "false") return false;
    errors.push_back(k + " = '" + v[k] + "' must be true or false");
    return false;
  };
  const int big = 1 << 30;
  if (!v["model.preset"].empty()) {
    auto p = GptConfig::Preset(v["model.preset"]);
    if (!p.ok()) errors.push_back("model.preset: " + p.status().message());
    else c.model = *p;
  } else {
    auto m = GptConfig::Make(get_int("model.vocab_size", 2, big), get_int("model.max_seq_len", 1, 1 << 20),
                             get_int("model.n_layer", 1, 1000), get_int("model.n_head", 1, 1000),
                             get_int("model.n_embd", 1, 1 << 16));
    if (!m.ok()) errors.push_back(m.status().message());
    else c.model = *m;
  }
  c.data_dir = v["data.dir"];
  c.data_mode = v["data.mode"];
  if (c.data_mode != "shared" && c.data_mode != "file" && c.data_mode != "fastfile") {
    errors.push_back("data.mode = '" + c.data_mode + "' must be shared, file or fastfile");
  }
  c.data_local_dir = v["data.local_dir"];
  c.data_parallel = get_int("data.parallel", 1, 256);
  c.seq_len = get_int("data.seq_len", 1, 1 << 20);
  c.batch_size = get_int("data.batch_size", 1, 1 << 20);
  c.data_seed = static_cast<uint64_t>(get_int("data.seed", 0, INT32_MAX));
  c.verify_checksums = get_bool("data.verify_checksums");
  c.optim.lr = static_cast<float>(get_double("optim.lr", 0, 10));
  c.optim.min_lr = static_cast<float>(get_double("optim.min_lr", 0, 10));
  c.optim.warmup_steps = get_int("optim.warmup_steps", 0, big);
  c.optim.decay_steps = get_int("optim.decay_steps", 0, big);
  c.optim.weight_decay = static_cast<float>(get_double("optim.weight_decay", 0, 10));
  c.optim.beta1 = static_cast<float>(get_double("optim.beta1", 0, 0.999999));
  c.optim.beta2 = static_cast<float>(get_double("optim.beta2", 0, 0.999999));
  c.optim.eps = static_cast<float>(get_double("optim.eps", 0, 1));
  c.optim.grad_clip = static_cast<float>(get_double("optim.grad_clip", 0, 1e9));
  c.steps = get_int("train.steps", 0, big);
  c.grad_accum = get_int("train.grad_accum", 1, 1 << 16);
  c.log_every = get_int("train.log_every", 1, big);
  c.eval_every = get_int("train.eval_every", 0, big);
  c.eval_batches = get_int("train.eval_batches", 1, 1 << 20);
  c.checkpoint_every = get_int("train.checkpoint_every", 0, big);
  c.checkpoint_dir = v["train.checkpoint_dir"];
  c.checkpoint_async = get_bool("train.checkpoint_async");
  c.checkpoint_hierarchical = get_bool("train.checkpoint_hierarchical");
  c.checkpoint_staging_dir = v["train.checkpoint_staging_dir"];
  if (c.checkpoint_hierarchical && (c.checkpoint_staging_dir.empty() || c.checkpoint_staging_dir.find("://") != std::string::npos)) {
    errors.push_back("train.checkpoint_staging_dir = '" + c.checkpoint_staging_dir +
                     "' must be a local folder (the hand-over between the ranks of one instance), e.g. /dev/shm");
  }
  c.checkpoint_keep = get_int("train.checkpoint_keep", 0, big);
  c.checkpoint_keep_every = get_int("train.checkpoint_keep_every", 0, big);
  c.resume = v["train.resume"];
  if (c.resume != "auto" && c.resume != "none") errors.push_back("train.resume = '" + c.resume + "' must be auto or none");
  c.max_bad_steps = get_int("train.max_bad_steps", 1, big);
  c.seed = static_cast<uint64_t>(get_int("train.seed", 0, INT32_MAX));
  c.kernels = v["train.kernels"];
  if (!BackendByName(c.kernels)) errors.push_back("train.kernels = '" + c.kernels + "' must be cpu or ref");
  c.threads = get_int("train.threads", 0, 1024);
  c.recompute = v["train.recompute"];
  if (!ParseRecompute(c.recompute)) {
    errors.push_back("train.recompute = '" + c.recompute + "' must be none, selective or full");
  }
  c.max_seconds = get_double("train.max_seconds", 0, 1e9);
  c.peak_gflops = get_double("train.peak_gflops", 0, 1e12);
  c.dp = get_int("dist.dp", 0, 1 << 20);
  c.tp = get_int("dist.tp", 1, 1 << 20);
  c.pp = get_int("dist.pp", 1, 1 << 20);
  c.zero = get_int("dist.zero", 0, 2);
  c.schedule = v["dist.schedule"];
  c.sequence_parallel = get_bool("dist.sequence_parallel");
  if (c.schedule != "1f1b" && c.schedule != "gpipe") {
    errors.push_back("dist.schedule = '" + c.schedule + "' must be 1f1b or gpipe");
  }
  if (auto d = ParseDType(v["train.dtype"]); !d.ok() || *d == DType::kI32 || *d == DType::kF64) {
    errors.push_back("train.dtype = '" + v["train.dtype"] + "' must be f32 or bf16");
  } else {
    c.dtype = *d;
  }
  if (c.dtype == DType::kBF16) {
    if (Backend* b = BackendByName(c.kernels)) {
      for (Op op : AllOps()) {
        if (!b->Supports(op, DType::kBF16)) {
          errors.push_back("train.dtype = bf16 but train.kernels = " + c.kernels + " has no bf16 " + OpName(op) +
                           ": use train.kernels=ref (bf16 emulated on the CPU, slow) or train.dtype=f32");
          break;
        }
      }
    }
    if (c.tp > 1 || c.pp > 1 || c.zero > 0) {
      errors.push_back("train.dtype = bf16 runs on one rank for now: set dist.tp = dist.pp = 1 and dist.zero = 0");
    }
  }
  c.bucket_mb = get_double("dist.bucket_mb", 0.001, 1e6);
  c.timeout_s = get_double("dist.timeout_s", 0.1, 1e7);
  if (c.optim.decay_steps == 0) c.optim.decay_steps = c.steps;
  if (c.data_dir.empty()) errors.push_back("data.dir is required: the folder anneal prep wrote");
  if (errors.empty() && c.seq_len > c.model.max_seq_len) {
    errors.push_back("data.seq_len " + std::to_string(c.seq_len) + " is longer than the model's max_seq_len " +
                     std::to_string(c.model.max_seq_len) + ": lower data.seq_len or raise model.max_seq_len");
  }
  if (!errors.empty()) {
    std::string m = where + ": ";
    for (size_t i = 0; i < errors.size(); ++i) m += (i ? "; " : "") + errors[i];
    return InvalidInput(m);
  }
  c.values = v;
  return c;
}

}  // namespace anneal
