// anneal prep: text corpora -> token shards + dataset.json, shared-nothing and parallel.
//
// The inputs are planned into work units from the inputs alone (never from the worker count): files
// in the order given (folders expanded, sorted), JSON Lines cut at line ends every ~unit_bytes, small
// files packed together, a text or .gz file kept whole (it is one document, or cannot be split
// without reading it). A unit's worker (the next free thread in one process; u % N among N
// separate processes) writes train_<u>.bin (and val_<u>.bin) and then, LAST, .units/<u>.json
// recording them. So:
//   - every shard's bytes are the same whatever N is;
//   - a re-run after a kill redoes only units without a record (or whose record's plan or shard
//     sizes no longer match);
//   - workers share nothing but the output folder; --worker-index/--num-workers run them on
//     separate machines, and --finalize writes dataset.json once all units are recorded.
// Every document is preceded by the tokenizer's end-of-text token; a document goes to the validation
// split when XXH64(document text) / 2^64 < val_fraction (so duplicates land in the same split).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"

namespace anneal {

struct PrepOptions {
  std::vector<std::string> inputs;
  std::string output;
  std::string tokenizer = "gpt2";
  int workers = 1;               // threads in this process
  double val_fraction = 0.0;
  uint64_t unit_bytes = 64ull << 20;
  bool replace_invalid_utf8 = false;
  int worker_index = -1;         // >= 0: this process is worker worker_index of num_workers
  int num_workers = 0;
  bool finalize_only = false;
  bool quiet = false;            // no progress output
};

struct Segment {
  std::string path;
  uint64_t begin = 0, end = 0;  // byte range of the file (whole file for .gz)
};

struct WorkUnit {
  uint32_t index = 0;
  std::vector<Segment> segments;
  uint64_t bytes = 0;
  uint64_t plan_key = 0;  // hash of segments + options that change the output
};

struct PrepReport {
  size_t units_total = 0, units_done = 0, units_skipped = 0;
  uint64_t bytes = 0, docs = 0, tokens = 0;
  double seconds = 0;
  bool finalized = false;
  // Finalized: the shard files (*.bin) in the output folder that this plan's dataset.json does not
  // list — an earlier prep's with other inputs or another --unit-mb. Kept (they may be someone's),
  // and named so that they can be removed: the loader reads only the listed shards, but a channel
  // (data.mode file) copies every file of the folder.
  std::vector<std::string> orphans;
};

// The deterministic plan. Errors: missing, empty or unreadable inputs (exit 2).
Result<std::vector<WorkUnit>> PlanUnits(Env& env, const PrepOptions& o);

Result<PrepReport> RunPrep(Env& env, const PrepOptions& o);

}  // namespace anneal
