// DataLoader: batches of (B, T+1) token windows from memory-mapped shards, for one data-parallel rank.
//
// A sample is a window of T+1 tokens starting at k*T in one shard (k = 0 .. (tokens-1)/T - 1;
// windows never cross shards); samples are numbered shard by shard. Row b of a batch is one sample:
// inputs are its first T tokens, targets its last T.
//
// Partition: every call to Next() is one micro-step of the whole data-parallel group. At global
// micro-step m, rank r reads stream positions m*dp*B + r*B + (0..B-1) (data/sampler.h). A run with
// dp ranks and a run with 1 rank and dp times the micro-steps per optimizer step therefore see the
// same samples in every step; the position (samples consumed by all ranks) resumes at any dp that
// divides it.
//
// Checks on open (errors name the file and the fix, exit 2): shard size against header, token count
// and checksum against dataset.json (when it has them and verify_checksums is set), the dataset's
// vocabulary against the model's, and for folders without dataset.json the largest token id.
// Thread-safety: one loader per thread; shards are read-only maps.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "data/dataset.h"
#include "data/sampler.h"
#include "data/shard.h"

namespace anneal {

// A dataset read as objects on demand (data.mode fastfile; data/channel.h makes one from an
// ObjectStore, pinning each object's ETag so that a rewritten object is an error, not a mix).
struct RemoteDataset {
  std::string where;                                                 // for messages
  std::function<Result<std::string>(const std::string& key)> get;   // a whole (small) object
  std::function<Result<uint64_t>(const std::string& key)> size;
  std::function<Status(const std::string& key, uint64_t offset, uint64_t n, std::string* out)> range;
  size_t block_bytes = 4 << 20;  // read-ahead unit
  size_t blocks = 16;            // cached per shard
  int max_fetches = 8;           // in flight at once, across shards
};

struct LoaderOptions {
  std::string dir;              // prep's output folder, or a plain llm.c shard folder
  std::string split = "train";  // "train" or "val"
  int batch = 1;                // B: samples per micro-batch on this rank
  int seq_len = 1024;           // T
  int dp_rank = 0;
  int dp_size = 1;
  uint64_t seed = 0;
  bool shuffle = true;
  uint32_t vocab_size = 0;      // the model's (unpadded) vocabulary; 0 skips the check
  bool verify_checksums = true;  // (remote shards: checked by size and pinned ETag, not read whole)
  std::shared_ptr<RemoteDataset> remote;  // set: read the dataset through it instead of dir
};

// Splits a (B, T+1) batch of Next() into the model's inputs and targets, (B, T) each.
void SplitBatch(const std::vector<uint32_t>& batch, int B, int T, std::vector<int32_t>* in, std::vector<int32_t>* tgt);

class DataLoader {
 public:
  static Result<std::unique_ptr<DataLoader>> Open(Env& env, const LoaderOptions& o);

  // Fills batch with B*(T+1) tokens (row-major) for this rank's next micro-batch.
  void Next(std::vector<uint32_t>* batch);
  LoaderPosition position() const { return {opt_.seed, consumed_}; }
  // Continues from a saved position. Fails if the seed differs or dp*B does not divide it.
  Status Seek(const LoaderPosition& p);
  uint64_t num_samples() const { return stream_.num_samples(); }
  // The first failed read of a remote shard (its batch held zeros): check after Next.
  Status status() const;
  uint64_t num_tokens() const { return total_tokens_; }
  const DatasetInfo& info() const { return info_; }
  // The sample id at stream position p (for tests and tools).
  uint64_t SampleAt(uint64_t p) const { return stream_.At(p); }
  // Copies sample s's T+1 tokens into dst.
  void ReadSample(uint64_t s, uint32_t* dst) const;

 private:
  DataLoader(LoaderOptions o, DatasetInfo info, std::vector<std::unique_ptr<ShardReader>> shards,
             std::vector<uint64_t> first_sample, uint64_t total_tokens);
  LoaderOptions opt_;
  DatasetInfo info_;
  std::vector<std::unique_ptr<ShardReader>> shards_;
  std::vector<uint64_t> first_sample_;  // first_sample_[i] = samples before shard i; last = total
  uint64_t total_tokens_;
  SampleStream stream_;
  uint64_t consumed_ = 0;
};

}  // namespace anneal
