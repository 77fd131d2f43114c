#include "data/loader.h"

#include <algorithm>

#include "core/checksum.h"

namespace anneal {

namespace {

// The dataset's manifest, from its folder or (fastfile) its object store.
Result<DatasetInfo> ReadDatasetInfo(Env& env, const LoaderOptions& o) {
  if (!o.remote) return LoadDataset(env, o.dir);
  auto text = o.remote->get("dataset.json");
  if (!text.ok()) {
    return InvalidInput("data.mode fastfile reads " + o.remote->where + " through its dataset.json, which is not there (" +
                        text.status().message() + "): upload the folder anneal prep wrote, or use data.mode file");
  }
  return DatasetInfo::FromJson(*text, o.remote->where + "/dataset.json");
}

Result<std::unique_ptr<ShardReader>> OpenShard(Env& env, const LoaderOptions& o, const std::string& file) {
  const std::string path = JoinPath(o.dir, file);
  if (!o.remote) return ShardReader::Open(env, path);
  ANNEAL_ASSIGN_OR_RETURN(uint64_t size, o.remote->size(file));
  auto remote = o.remote;
  return ShardReader::OpenRemote(
      path, size, [remote, file](uint64_t off, uint64_t n, std::string* out) { return remote->range(file, off, n, out); },
      o.remote->block_bytes, o.remote->blocks, o.remote->max_fetches);
}

// A shard agrees with its manifest entry (token count and width, checksum when asked), or without a
// manifest holds no token outside the model's vocabulary.
Status CheckShard(const ShardReader& r, const DatasetInfo& info, const ShardInfo& s, const std::string& path,
                  const LoaderOptions& o) {
  if (info.has_manifest) {
    if (r.tokens() != s.tokens || r.token_bytes() != info.token_bytes) {
      return InvalidInput("shard " + path + " holds " + std::to_string(r.tokens()) + " tokens of " +
                          std::to_string(r.token_bytes()) + " bytes but dataset.json says " + std::to_string(s.tokens) +
                          " of " + std::to_string(info.token_bytes) +
                          ": the folder mixes datasets; re-run anneal prep into an empty folder");
    }
    if (o.verify_checksums && s.xxh64 && !r.remote() && r.Checksum() != *s.xxh64) {
      return InvalidInput("shard " + path + " is corrupt: its XXH64 is " + HexU64(r.Checksum()) + ", dataset.json says " +
                          HexU64(*s.xxh64) + "; delete it and re-run anneal prep (it rewrites missing shards)");
    }
  } else if (o.vocab_size != 0 && o.verify_checksums) {
    const uint32_t m = r.MaxToken();
    if (m >= o.vocab_size) {
      return InvalidInput("shard " + path + " holds token id " + std::to_string(m) + ", outside the model's vocabulary of " +
                          std::to_string(o.vocab_size) +
                          ": it was made with another tokenizer; re-run anneal prep with the model's tokenizer");
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<DataLoader>> DataLoader::Open(Env& env, const LoaderOptions& o) {
  if (o.batch < 1 || o.seq_len < 1) return InvalidInput("loader: batch and seq_len must be at least 1");
  if (o.dp_size < 1 || o.dp_rank < 0 || o.dp_rank >= o.dp_size) {
    return InvalidInput("loader: dp_rank " + std::to_string(o.dp_rank) + " is not in [0, dp_size=" +
                        std::to_string(o.dp_size) + ")");
  }
  if (o.split != "train" && o.split != "val") return InvalidInput("loader: split must be train or val");
  ANNEAL_ASSIGN_OR_RETURN(DatasetInfo info, ReadDatasetInfo(env, o));
  if (info.has_manifest && o.vocab_size != 0 && info.vocab_size != o.vocab_size) {
    return InvalidInput("dataset " + o.dir + " was tokenized with '" + info.tokenizer + "' (vocabulary " +
                        std::to_string(info.vocab_size) + ") but the model's vocabulary is " +
                        std::to_string(o.vocab_size) + ": re-run anneal prep with the model's tokenizer, or "
                        "set the model's vocab_size to match");
  }
  std::vector<std::unique_ptr<ShardReader>> shards;
  std::vector<uint64_t> first{0};
  uint64_t total = 0;
  const uint64_t T = static_cast<uint64_t>(o.seq_len);
  for (const auto& s : info.shards) {
    if (s.split != o.split) continue;
    ANNEAL_ASSIGN_OR_RETURN(std::unique_ptr<ShardReader> r, OpenShard(env, o, s.file));
    ANNEAL_RETURN_IF_ERROR(CheckShard(*r, info, s, JoinPath(o.dir, s.file), o));
    const uint64_t n = r->tokens() > T ? (r->tokens() - 1) / T : 0;
    total += r->tokens();
    first.push_back(first.back() + n);
    shards.push_back(std::move(r));
  }
  if (shards.empty()) {
    return InvalidInput("dataset " + o.dir + " has no " + o.split + " shards" +
                        (o.split == "val" ? " (prep with --val-fraction > 0 makes some)" : ""));
  }
  if (first.back() == 0) {
    return InvalidInput("dataset " + o.dir + " split " + o.split + " has " + std::to_string(total) +
                        " tokens, but no shard holds the " + std::to_string(T + 1) +
                        " a window needs: use a shorter seq_len or more data");
  }
  return std::unique_ptr<DataLoader>(new DataLoader(o, std::move(info), std::move(shards), std::move(first), total));
}

DataLoader::DataLoader(LoaderOptions o, DatasetInfo info, std::vector<std::unique_ptr<ShardReader>> shards,
                       std::vector<uint64_t> first_sample, uint64_t total_tokens)
    : opt_(std::move(o)),
      info_(std::move(info)),
      shards_(std::move(shards)),
      first_sample_(std::move(first_sample)),
      total_tokens_(total_tokens),
      stream_(first_sample_.back(), opt_.seed, opt_.shuffle) {}

void DataLoader::ReadSample(uint64_t s, uint32_t* dst) const {
  size_t i = static_cast<size_t>(std::upper_bound(first_sample_.begin(), first_sample_.end(), s) -
                                 first_sample_.begin()) - 1;
  uint64_t k = s - first_sample_[i];
  const uint64_t T = static_cast<uint64_t>(opt_.seq_len);
  shards_[i]->Read(k * T, T + 1, dst);
}

void DataLoader::Next(std::vector<uint32_t>* batch) {
  const uint64_t B = static_cast<uint64_t>(opt_.batch), T1 = static_cast<uint64_t>(opt_.seq_len) + 1;
  batch->resize(B * T1);
  const uint64_t base = consumed_ + static_cast<uint64_t>(opt_.dp_rank) * B;
  for (uint64_t b = 0; b < B; ++b) ReadSample(stream_.At(base + b), batch->data() + b * T1);
  consumed_ += static_cast<uint64_t>(opt_.dp_size) * B;
}

Status DataLoader::status() const {
  for (const auto& s : shards_) ANNEAL_RETURN_IF_ERROR(s->status());
  return Status::Ok();
}

Status DataLoader::Seek(const LoaderPosition& p) {
  if (p.seed != opt_.seed) {
    return InvalidInput("loader position was saved with seed " + std::to_string(p.seed) + ", this run uses " +
                        std::to_string(opt_.seed) + ": resume with the same data seed");
  }
  const uint64_t step = static_cast<uint64_t>(opt_.dp_size) * static_cast<uint64_t>(opt_.batch);
  if (p.samples % step != 0) {
    return InvalidInput("loader position " + std::to_string(p.samples) + " samples is not a multiple of dp*B = " +
                        std::to_string(step) + ": resume with a data-parallel size and micro-batch whose "
                        "product divides it");
  }
  consumed_ = p.samples;
  return Status::Ok();
}

void SplitBatch(const std::vector<uint32_t>& batch, int B, int T, std::vector<int32_t>* in, std::vector<int32_t>* tgt) {
  in->resize(static_cast<size_t>(B) * T);
  tgt->resize(static_cast<size_t>(B) * T);
  for (int b = 0; b < B; ++b) {
    const uint32_t* row = batch.data() + static_cast<size_t>(b) * (T + 1);
    for (int t = 0; t < T; ++t) {
      (*in)[static_cast<size_t>(b) * T + t] = static_cast<int32_t>(row[t]);
      (*tgt)[static_cast<size_t>(b) * T + t] = static_cast<int32_t>(row[t + 1]);
    }
  }
}

}  // namespace anneal
