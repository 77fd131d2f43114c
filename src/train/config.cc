#include "train/config.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>

#include "core/env.h"
#include "core/utf8.h"
#include "kernels/registry.h"
#include "model/family.h"
#include "train/config_text.h"

namespace anneal {

namespace {

// A key, its default as text, and how to store a parsed value.
struct KeySpec {
  const char* key;
  const char* def;
  const char* help;
};

const KeySpec kSpecs[] = {
    {"model.preset", "",
     "gpt2 | gpt2-medium | gpt2-large | gpt2-xl | llama-tiny | llama-3.2-1b | llama-3.2-3b | llama-3-8b; overrides "
     "the shape keys (and model.family), but model.vocab_size and model.max_seq_len, when given, override the "
     "preset's (a vocabulary is the tokenizer's, a context the data's)"},
    {"model.family", "gpt2",
     "gpt2 (LayerNorm, learned positions, GELU MLP, tied embeddings, biases) | llama (RMSNorm, rotary positions, "
     "SwiGLU MLP, grouped-query attention, no biases)"},
    {"model.vocab_size", "50257", "tokens in the vocabulary (the dataset's)"},
    {"model.max_seq_len", "256", "rows of the position embedding"},
    {"model.n_layer", "4", "transformer blocks"},
    {"model.n_head", "4", "attention heads (must divide n_embd)"},
    {"model.n_embd", "256", "channels"},
    {"model.n_kv_head", "0", "llama: key/value heads, dividing n_head (1 = multi-query; 0 = n_head)"},
    {"model.intermediate_size", "0", "llama: the SwiGLU MLP's width (0 = 8/3 n_embd rounded up to a multiple of 64)"},
    {"model.norm_eps", "1e-5", "llama: RMSNorm's epsilon"},
    {"model.rope_theta", "10000", "llama: the rotary embedding's base (Llama 3: 500000)"},
    {"model.rope_scaling.factor", "0", "llama: Llama 3's rotary frequency scaling factor (0 = none; Llama 3.2: 32)"},
    {"model.rope_scaling.low_freq_factor", "1", "llama: rope scaling's low frequency factor"},
    {"model.rope_scaling.high_freq_factor", "4", "llama: rope scaling's high frequency factor"},
    {"model.rope_scaling.original_max_seq_len", "8192", "llama: the context the rope scaling extends"},
    {"model.tie_embeddings", "false", "llama: the LM head reads wte (GPT-2: always tied)"},
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
    {"data.eval_split", "val", "the split validation reads, in order (unshuffled): val | train"},
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
    {"train.init_from", "",
     "a checkpoint (step-NNNNNNNN folder or checkpoint_dir) or a Hugging Face model folder whose weights a fresh "
     "run starts from, with a fresh optimizer (fine-tuning); the model keys must describe the same model. Ignored "
     "when the run resumes from its own checkpoint"},
    {"train.max_bad_steps", "5", "non-finite steps in a row that stop the run"},
    {"train.seed", "1234", "weight-initialization seed"},
    {"train.device", "cpu", "deprecated, an alias: train.device = cuda is train.kernels = cuda (say that instead)"},
    {"train.kernels", "cpu",
     "cpu | ref | cuda: where and with what the model trains — cpu (OpenBLAS and OpenMP), ref (the reference loops, "
     "one thread; bf16 emulated) or cuda (the CUDA backend on GPU 0, in progress — not yet checked on a device)"},
    {"train.dtype", "f32",
     "f32 | bf16: parameters, gradients and activations (bf16: fp32 master weights in the optimizer, checkpoints in "
     "fp32, data-parallel gradients summed in fp32 (dist.reduce_dtype), pipeline activations and gradients and "
     "tensor-parallel collectives in bf16; needs a backend with bf16 ops — ref emulates them)"},
    {"train.offload_activations", "false",
     "keep each layer's input (all full recomputation keeps) in pinned host memory, copied out after the layer "
     "runs and back before its backward: the device holds 3 layers' inputs instead of every layer's; needs "
     "train.recompute = full, dist.pp = 1 and a device whose memory is not the host's (train.kernels = cuda)"},
    {"train.recompute", "none",
     "activation recomputation: none | selective (GELU recomputed in backward) | full (each layer's forward "
     "recomputed in backward; only layer outputs kept)"},
    {"train.threads", "0", "OpenMP threads (0 = OMP_NUM_THREADS or all cores)"},
    {"train.max_seconds", "0", "stop with a checkpoint after this long (0 = no limit)"},
    {"train.peak_gflops", "0", "peak GFLOP/s for MFU (0 = measure sgemm at start)"},
    {"train.profile_steps", "",
     "[FROM, TO]: every rank records steps FROM..TO (1-based, inclusive) as a Chrome trace (empty = off); "
     "anneal profile merges and summarizes them"},
    {"train.profile_dir", "",
     "where the traces go, rank-RRRRR.trace.json (empty = $ANNEAL_OUTPUT_DIR/profile under an agent, else ./profile)"},
    {"dist.dp", "0", "data-parallel ranks (0 = the world size / (tp x pp))"},
    {"dist.tp", "1", "tensor-parallel ranks"},
    {"dist.pp", "1", "pipeline stages"},
    {"dist.sequence_parallel", "false",
     "with dist.tp > 1: keep LayerNorms and residual adds on 1/tp of the positions each (reduce-scatter and "
     "all-gather instead of allreduce; less activation memory)"},
    {"dist.schedule", "1f1b",
     "pipeline schedule over the micro-batches (train.grad_accum): 1f1b (one forward, one backward; at most pp "
     "micro-batches in flight) | gpipe (all forwards, then all backwards)"},
    {"dist.zero", "0",
     "ZeRO stage: 0 replicated optimizer; 1 sharded optimizer state; 2 sharded gradients too; 3 sharded parameters "
     "too (each layer all-gathered before its forward and its backward, the next one prefetched, freed after)"},
    {"dist.shard_group", "0",
     "ZeRO (1-3) shards within groups of this many consecutive data-parallel ranks and replicates across the groups "
     "(MiCS / hybrid sharding: gathers and reduce-scatters stay inside a group, the groups' gradient shards are "
     "allreduced); must divide dp; 0 = shard over all data-parallel ranks"},
    {"dist.reduce_dtype", "f32",
     "f32 | bf16: what data-parallel gradients are reduced in. f32 widens a bf16 model's gradients first; bf16 "
     "reduces them as they are (half the bytes on the wire, each sum taken in fp32 and rounded once; NCCL rounds as "
     "it goes) and needs train.dtype = bf16"},
    {"dist.bucket_mb", "4", "gradient bucket size for the overlapped communication, MB"},
    {"dist.timeout_s", "300", "every collective's timeout: a lost rank fails the run after this long (exit 3)"},
};

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

namespace {

// The resolved values of every key, read as typed values; each bad value adds an error naming the
// key and what it must be (all are collected before the config is refused).
class Reader {
 public:
  // from_set: the keys an override gave, each with its "--set" text (errors about them name it);
  // given: every key the file or an override gave.
  Reader(std::map<std::string, std::string> v, std::map<std::string, std::string> from_set,
         std::set<std::string> given)
      : v_(std::move(v)), from_set_(std::move(from_set)), given_(std::move(given)) {}
  const std::string& Str(const std::string& k) { return v_[k]; }
  // A line for the user about a key still read but on its way out (TrainConfig::deprecations).
  void Deprecated(std::string line) { deprecations_.push_back(std::move(line)); }
  const std::vector<std::string>& deprecations() const { return deprecations_; }
  bool Given(const std::string& k) const { return given_.count(k) > 0; }
  // Replaces a value (the resolved config then records what was used).
  void Set(const std::string& k, std::string value) { v_[k] = std::move(value); }
  int Int(const std::string& k, int lo, int hi) {
    try {
      size_t pos;
      long long x = std::stoll(v_[k], &pos);
      if (pos != v_[k].size() || x < lo || x > hi) throw std::out_of_range("");
      return static_cast<int>(x);
    } catch (...) {
      KeyError(k, k + " = '" + v_[k] + "' must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
      return lo;
    }
  }
  double Num(const std::string& k, double lo, double hi) {
    try {
      size_t pos;
      double x = std::stod(v_[k], &pos);
      if (pos != v_[k].size() || !(x >= lo && x <= hi)) throw std::out_of_range("");
      return x;
    } catch (...) {
      KeyError(k, k + " = '" + v_[k] + "' must be a number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
      return lo;
    }
  }
  float Float(const std::string& k, double lo, double hi) { return static_cast<float>(Num(k, lo, hi)); }
  bool Bool(const std::string& k) {
    if (v_[k] == "true") return true;
    if (v_[k] == "false") return false;
    KeyError(k, k + " = '" + v_[k] + "' must be true or false");
    return false;
  }
  // The value, which must be one of `allowed` ("must be a, b or c" otherwise).
  std::string OneOf(const std::string& k, const std::vector<std::string>& allowed) {
    const std::string& x = v_[k];
    if (std::find(allowed.begin(), allowed.end(), x) != allowed.end()) return x;
    std::string list;
    for (size_t i = 0; i < allowed.size(); ++i) list += (i == 0 ? "" : i + 1 == allowed.size() ? " or " : ", ") + allowed[i];
    KeyError(k, k + " = '" + x + "' must be " + list);
    return x;
  }
  void Error(std::string e) { errors_.push_back(std::move(e)); }
  // An error about key k's value: blamed on its --set when an override gave it.
  void KeyError(const std::string& k, std::string e) {
    auto it = from_set_.find(k);
    Error(it == from_set_.end() ? std::move(e) : "--set " + it->second + ": " + e);
  }
  const std::vector<std::string>& errors() const { return errors_; }
  const std::map<std::string, std::string>& values() const { return v_; }

 private:
  std::map<std::string, std::string> v_;
  std::map<std::string, std::string> from_set_;
  std::set<std::string> given_;
  std::vector<std::string> errors_;
  std::vector<std::string> deprecations_;
};

constexpr int kBig = 1 << 30;

void ReadModel(Reader& r, ModelConfig* m) {
  if (!r.Str("model.preset").empty()) {
    auto p = ModelConfig::Preset(r.Str("model.preset"));
    if (!p.ok()) {
      r.Error("model.preset: " + p.status().message());
      return;
    }
    *m = *p;
    // The vocabulary is the tokenizer's and the context the data's: given, they override the preset's.
    // Either way the resolved config records the value used (a replay of it builds the same model).
    if (r.Given("model.vocab_size")) m->vocab_size = r.Int("model.vocab_size", 2, kBig);
    if (r.Given("model.max_seq_len")) m->max_seq_len = r.Int("model.max_seq_len", 1, 1 << 20);
    r.Set("model.vocab_size", std::to_string(m->vocab_size));
    r.Set("model.max_seq_len", std::to_string(m->max_seq_len));
    if (Status st = m->Finish(); !st.ok()) r.Error(st.message());  // the padded vocabulary follows
    return;
  }
  ModelConfig c;
  c.family = r.Str("model.family");
  if (c.family == "gpt2") {  // the Llama family's keys shape nothing in GPT-2: one given is a mistake
    for (const KeySpec& k : kSpecs) {
      const std::string key = k.key;
      if (key.rfind("model.", 0) == 0 && std::string(k.help).rfind("llama:", 0) == 0 && r.Str(key) != k.def) {
        r.KeyError(key, key + " = " + r.Str(key) + " shapes a Llama, not GPT-2: set model.family=llama, or drop it");
      }
    }
  }
  c.vocab_size = r.Int("model.vocab_size", 2, kBig);
  c.max_seq_len = r.Int("model.max_seq_len", 1, 1 << 20);
  c.n_layer = r.Int("model.n_layer", 1, 1000);
  c.n_head = r.Int("model.n_head", 1, 1000);
  c.n_embd = r.Int("model.n_embd", 1, 1 << 16);
  const int kv = r.Int("model.n_kv_head", 0, 1000), f = r.Int("model.intermediate_size", 0, 1 << 20);
  c.n_kv_head = kv > 0 ? kv : c.n_head;
  c.intermediate_size = f > 0 ? f : (8 * c.n_embd / 3 + 63) / 64 * 64;
  c.norm_eps = r.Float("model.norm_eps", 1e-12, 1);
  c.rope_theta = r.Float("model.rope_theta", 1, 1e9);
  c.rope_scaling.factor = r.Float("model.rope_scaling.factor", 0, 1e6);
  c.rope_scaling.low_freq_factor = r.Float("model.rope_scaling.low_freq_factor", 0, 1e6);
  c.rope_scaling.high_freq_factor = r.Float("model.rope_scaling.high_freq_factor", 0, 1e6);
  c.rope_scaling.original_max_seq_len = r.Int("model.rope_scaling.original_max_seq_len", 1, 1 << 30);
  c.tie_embeddings = r.Bool("model.tie_embeddings");
  if (!r.errors().empty()) return;
  if (Status st = c.Finish(); !st.ok()) r.Error(st.message());
  else *m = c;
}

void ReadData(Reader& r, DataSection* d) {
  d->dir = r.Str("data.dir");
  d->mode = r.OneOf("data.mode", {"shared", "file", "fastfile"});
  d->local_dir = r.Str("data.local_dir");
  d->parallel = r.Int("data.parallel", 1, 256);
  d->seq_len = r.Int("data.seq_len", 1, 1 << 20);
  d->batch_size = r.Int("data.batch_size", 1, 1 << 20);
  d->seed = static_cast<uint64_t>(r.Int("data.seed", 0, INT32_MAX));
  d->verify_checksums = r.Bool("data.verify_checksums");
  d->eval_split = r.OneOf("data.eval_split", {"val", "train"});
}

void ReadOptim(Reader& r, AdamWOptions* o) {
  o->lr = r.Float("optim.lr", 0, 10);
  o->min_lr = r.Float("optim.min_lr", 0, 10);
  o->warmup_steps = r.Int("optim.warmup_steps", 0, kBig);
  o->decay_steps = r.Int("optim.decay_steps", 0, kBig);
  o->weight_decay = r.Float("optim.weight_decay", 0, 10);
  o->beta1 = r.Float("optim.beta1", 0, 0.999999);
  o->beta2 = r.Float("optim.beta2", 0, 0.999999);
  o->eps = r.Float("optim.eps", 0, 1);
  o->grad_clip = r.Float("optim.grad_clip", 0, 1e9);
}

void ReadCheckpoint(Reader& r, CheckpointSection* k) {
  k->every = r.Int("train.checkpoint_every", 0, kBig);
  k->dir = r.Str("train.checkpoint_dir");
  k->async = r.Bool("train.checkpoint_async");
  k->hierarchical = r.Bool("train.checkpoint_hierarchical");
  k->staging_dir = r.Str("train.checkpoint_staging_dir");
  if (k->hierarchical && (k->staging_dir.empty() || k->staging_dir.find("://") != std::string::npos)) {
    r.Error("train.checkpoint_staging_dir = '" + k->staging_dir +
            "' must be a local folder (the hand-over between the ranks of one instance), e.g. /dev/shm");
  }
  k->keep = r.Int("train.checkpoint_keep", 0, kBig);
  k->keep_every = r.Int("train.checkpoint_keep_every", 0, kBig);
  k->resume = r.OneOf("train.resume", {"auto", "none"});
  k->init_from = r.Str("train.init_from");
}

// train.profile_steps: "FROM,TO" (a YAML or JSON list of two flattens to that) or one step "N".
void ReadProfileSteps(Reader& r, LoopSection* t) {
  const std::string v = r.Str("train.profile_steps");
  if (v.empty()) return;
  int from = 0, to = 0;
  char tail = 0;
  const int n = std::sscanf(v.c_str(), "%d , %d %c", &from, &to, &tail);
  if (n == 1) to = from;
  if ((n != 1 && n != 2) || from < 1 || to < from) {
    r.Error("train.profile_steps = '" + v + "' must be [FROM, TO] with 1 <= FROM <= TO (steps, 1-based), e.g. [3, 5]");
    return;
  }
  t->profile_from = from;
  t->profile_to = to;
}

// train.kernels chooses the backend, and with it the device; train.device is its deprecated alias
// (cuda there is kernels = cuda). Errors name the key the user gave.
void ReadKernels(Reader& r, LoopSection* t) {
  t->kernels = r.Str("train.kernels");
  const std::string device = r.OneOf("train.device", {"cpu", "cuda"});
  const bool by_device = r.Given("train.device") && !r.Given("train.kernels");
  if (r.Given("train.device")) {
    r.Deprecated("train.device is deprecated: write train.kernels = " + (device == "cuda" ? device : t->kernels) +
                 " (cpu | ref | cuda) instead; train.device will be removed");
  }
  if (device == "cuda" && !r.Given("train.kernels")) t->kernels = "cuda";
  if (device == "cuda" && t->kernels != "cuda") {
    r.Error("train.kernels = " + t->kernels + " runs on the CPU but train.device = cuda: leave train.device unset and "
            "set train.kernels (cpu | ref | cuda)");
  }
  const std::string key = by_device ? "train.device" : "train.kernels";
  std::string why;
  if (t->kernels == "cuda" && !BackendByName("cuda", &why)) {
    r.Error(key + " = cuda but " + why + ": train on the CPU with " + key + "=cpu");
  } else if (!BackendByName(t->kernels)) {
    r.Error("train.kernels = '" + t->kernels + "' must be cpu, ref or cuda");
  }
}

void ReadLoop(Reader& r, LoopSection* t) {
  t->steps = r.Int("train.steps", 0, kBig);
  t->grad_accum = r.Int("train.grad_accum", 1, 1 << 16);
  t->log_every = r.Int("train.log_every", 1, kBig);
  t->eval_every = r.Int("train.eval_every", 0, kBig);
  t->eval_batches = r.Int("train.eval_batches", 1, 1 << 20);
  t->max_bad_steps = r.Int("train.max_bad_steps", 1, kBig);
  t->seed = static_cast<uint64_t>(r.Int("train.seed", 0, INT32_MAX));
  ReadKernels(r, t);
  t->threads = r.Int("train.threads", 0, 1024);
  t->recompute = r.Str("train.recompute");
  if (!ParseRecompute(t->recompute)) r.Error("train.recompute = '" + t->recompute + "' must be none, selective or full");
  t->offload_activations = r.Bool("train.offload_activations");
  t->max_seconds = r.Num("train.max_seconds", 0, 1e9);
  t->peak_gflops = r.Num("train.peak_gflops", 0, 1e12);
  ReadProfileSteps(r, t);
  t->profile_dir = r.Str("train.profile_dir");
  if (auto d = ParseDType(r.Str("train.dtype")); !d.ok() || *d == DType::kI32 || *d == DType::kF64) {
    r.Error("train.dtype = '" + r.Str("train.dtype") + "' must be f32 or bf16");
  } else {
    t->dtype = *d;
  }
}

void ReadDist(Reader& r, DistSection* d) {
  d->dp = r.Int("dist.dp", 0, 1 << 20);
  d->tp = r.Int("dist.tp", 1, 1 << 20);
  d->pp = r.Int("dist.pp", 1, 1 << 20);
  d->zero = r.Int("dist.zero", 0, 3);
  d->shard_group = r.Int("dist.shard_group", 0, 1 << 20);
  if (auto t = ParseDType(r.Str("dist.reduce_dtype")); !t.ok() || (*t != DType::kF32 && *t != DType::kBF16)) {
    r.Error("dist.reduce_dtype = '" + r.Str("dist.reduce_dtype") + "' must be f32 or bf16");
  } else {
    d->reduce_dtype = *t;
  }
  d->schedule = r.OneOf("dist.schedule", {"1f1b", "gpipe"});
  d->sequence_parallel = r.Bool("dist.sequence_parallel");
  d->bucket_mb = r.Num("dist.bucket_mb", 0.001, 1e6);
  d->timeout_s = r.Num("dist.timeout_s", 0.1, 1e7);
}

// The checks across sections.
void CheckTogether(Reader& r, TrainConfig* c) {
  if (Backend* b = BackendByName(c->train.kernels); b && r.errors().empty()) {
    if (auto op = MissingOp(c->model, *b, c->train.dtype)) {
      if (c->train.dtype == DType::kBF16 && !MissingOp(c->model, *b, DType::kF32)) {
        r.Error("train.dtype = bf16 but train.kernels = " + c->train.kernels + " has no bf16 " + OpName(*op) +
                ": use train.kernels=ref (bf16 emulated on the CPU, slow) or train.dtype=f32");
      } else {
        r.Error("model.family = " + c->model.family + " needs the op " + OpName(*op) + ", which train.kernels = " +
                c->train.kernels + " does not have yet: use train.kernels=cpu (or ref)");
      }
    }
  }
  if (c->train.offload_activations) {
    if (c->train.recompute != "full") {
      r.Error("train.offload_activations keeps each layer's input in host memory, which is all that full "
              "recomputation keeps; offloading every activation of a layer is not built: set train.recompute = full");
    } else if (c->dist.pp > 1) {
      r.Error("train.offload_activations with dist.pp = " + std::to_string(c->dist.pp) +
              ": a pipeline stage keeps several micro-batches' layer inputs, which offload does not handle yet: "
              "set dist.pp = 1");
    } else if (c->train.kernels != "cuda") {
      r.Error("train.offload_activations moves activations from device memory to host memory, but train.kernels = " +
              c->train.kernels + " keeps them in host memory already: offload is for train.kernels = cuda");
    }
  }
  if (c->dist.reduce_dtype == DType::kBF16 && c->train.dtype != DType::kBF16) {
    r.Error("dist.reduce_dtype = bf16 reduces a bf16 model's gradients as they are, but train.dtype = " +
            std::string(DTypeName(c->train.dtype)) + ": set train.dtype = bf16, or leave dist.reduce_dtype = f32");
  }
  if (c->optim.decay_steps == 0) c->optim.decay_steps = c->train.steps;
  if (c->data.dir.empty()) r.Error("data.dir is required: the folder anneal prep wrote");
  if (r.errors().empty() && c->data.seq_len > c->model.max_seq_len) {
    r.Error("data.seq_len " + std::to_string(c->data.seq_len) + " is longer than the model's max_seq_len " +
            std::to_string(c->model.max_seq_len) + ": lower data.seq_len or raise model.max_seq_len");
  }
}

Status FlattenConfigText(const std::string& text, const std::string& where, std::map<std::string, std::string>* out,
                         std::vector<std::string>* errors) {
#ifdef ANNEAL_HAVE_YAML
  return FlattenYamlConfig(text, where, out, errors);
#else
  return FlattenJsonConfig(text, where, out, errors);
#endif
}

// The given keys (the YAML file's, then the overrides') over the defaults; unknown keys are errors,
// blamed on the --set that gave them when one did. *from_set: each overridden key's "--set" text.
Result<std::map<std::string, std::string>> Resolve(const std::string& yaml_text, const std::vector<std::string>& overrides,
                                                   const std::string& where, std::vector<std::string>* errors,
                                                   std::map<std::string, std::string>* from_set,
                                                   std::set<std::string>* given_keys) {
  std::map<std::string, std::string> given;
  ANNEAL_RETURN_IF_ERROR(FlattenConfigText(yaml_text, where, &given, errors));
  for (const auto& o : overrides) {
    size_t eq = o.find('=');
    if (FindInvalidUtf8(o) != std::string::npos) {  // a value the manifest's JSON could not hold
      errors->push_back("--set " + ReplaceInvalidUtf8(o) + " is not UTF-8 text (each invalid byte shown as U+FFFD)");
      continue;
    }
    if (eq == std::string::npos || eq == 0) {
      errors->push_back("--set " + o + " must look like section.key=value");
      continue;
    }
    given[o.substr(0, eq)] = o.substr(eq + 1);
    (*from_set)[o.substr(0, eq)] = o;
  }
  std::map<std::string, std::string> v;
  for (const auto& s : kSpecs) v[s.key] = s.def;
  for (const auto& [k, val] : given) {
    if (!v.count(k)) {
      const auto set = from_set->find(k);
      errors->push_back((set == from_set->end() ? "" : "--set " + set->second + ": ") + "unknown key '" + k +
                        "' (did you mean '" + Closest(k) + "'?)");
      continue;
    }
    v[k] = val;
    given_keys->insert(k);
  }
  return v;
}

// A value as a YAML scalar that reads back as the same text: plain when it is plain, else quoted.
std::string YamlScalar(const std::string& v) {
  const bool plain = !v.empty() && v.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./+-") ==
                                       std::string::npos;
  if (plain) return v;
  std::string q = "\"";
  for (char ch : v) {
    if (ch == '"' || ch == '\\') q += '\\';
    q += ch;
  }
  return q + "\"";
}

}  // namespace

Result<TrainConfig> TrainConfig::Parse(const std::string& yaml_text, const std::vector<std::string>& overrides,
                                       const std::string& where) {
  std::vector<std::string> early;
  std::map<std::string, std::string> from_set;
  std::set<std::string> given;
  ANNEAL_ASSIGN_OR_RETURN(auto values, Resolve(yaml_text, overrides, where, &early, &from_set, &given));
  Reader r(std::move(values), std::move(from_set), std::move(given));
  for (auto& e : early) r.Error(std::move(e));
  TrainConfig c;
  ReadModel(r, &c.model);
  ReadData(r, &c.data);
  ReadOptim(r, &c.optim);
  ReadLoop(r, &c.train);
  ReadCheckpoint(r, &c.checkpoint);
  ReadDist(r, &c.dist);
  CheckTogether(r, &c);
  if (!r.errors().empty()) {
    // The file's (and the checks across keys') errors after its name; an override's after its --set.
    std::string in_file, in_sets;
    for (const std::string& e : r.errors()) {
      std::string& to = e.rfind("--set ", 0) == 0 ? in_sets : in_file;
      to += (to.empty() ? "" : "; ") + e;
    }
    std::string m = in_file.empty() ? "" : where + ": " + in_file;
    if (!in_sets.empty()) m += (m.empty() ? "" : "; ") + in_sets;
    return InvalidInput(m);
  }
  c.values = r.values();
  c.deprecations = r.deprecations();
  return c;
}

std::string TrainConfig::DeprecationText() const {
  std::string out;
  for (const std::string& d : deprecations) out += "anneal: warning: " + d + "\n";
  return out;
}

std::string TrainConfig::ResolvedYaml() const {
  std::string out;
  std::string section;
  for (const auto& s : kSpecs) {  // in the table's order, each section once
    const std::string key = s.key, sec = key.substr(0, key.find('.'));
    if (sec != section) {
      section = sec;
      out += section + ":\n";
    }
    const auto it = values.find(key);
    out += "  " + key.substr(sec.size() + 1) + ": " + YamlScalar(it == values.end() ? s.def : it->second) + "\n";
  }
  return out;
}

}  // namespace anneal
