// The trace files `anneal profile` merges (train/trace_summary.h): each rank's Chrome Trace Event
// Format JSON, read back from a job's output folder. The input, split at NUL bytes, is up to four
// ranks' files. Properties: a merge that succeeds is JSON with every rank, and its summary's fractions
// are numbers in [0, 1] or the merge says which file is wrong.
#include <cmath>

#include <nlohmann/json.hpp>

#include "fuzz/fuzz_target.h"
#include "train/trace_summary.h"

ANNEAL_FUZZ_TARGET(trace) {
  const std::string text = anneal::fuzz::Text(data, size);
  std::vector<anneal::TraceInput> files;
  for (size_t p = 0, q; p <= text.size() && files.size() < 4; p = q + 1) {
    q = text.find('\0', p);
    if (q == std::string::npos) q = text.size();
    files.push_back({"trace-rank" + std::to_string(files.size()) + ".json", text.substr(p, q - p)});
  }
  anneal::TraceSummary summary;
  auto merged = anneal::MergeTraces(files, &summary);
  if (!merged.ok()) {
    FUZZ_EXPECT(merged.status().message().find("trace-rank") != std::string::npos);
    return 0;
  }
  FUZZ_EXPECT(nlohmann::json::accept(*merged));
  FUZZ_EXPECT(summary.ranks.size() == files.size());
  (void)summary.Table();
  (void)summary.Reading();
  return 0;
}
