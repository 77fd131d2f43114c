// The ranks' step traces (train/profiler.h, docs/formats/trace.md) merged into one file, and where
// their step time goes — what `anneal profile` prints.
//
// Where the time goes is read off each rank's main thread (the track with the "step" spans): every
// span's exclusive time (its duration less its children's) inside a step is counted to its category —
// forward, backward and optimizer are compute; comm is communication the step waited on (overlapped
// communication runs on the group's own track and costs nothing here); pipeline is time blocked on
// the pipeline's sends and receives; data, checkpoint; the rest (the step's own code, validation) is
// other. The pipeline's idle fraction is also given as the trainer measures it: time blocked on
// sends and receives over the forward-backward schedule's time ("forward-backward" spans).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace anneal {

struct TraceInput {
  std::string name;  // where it came from (errors name it)
  std::string text;  // one rank's Trace Event Format JSON
};

struct RankTime {
  int rank = 0;
  std::map<std::string, std::string> labels;  // the file's otherData (dp_rank, pp_rank, host, ...)
  int steps = 0;
  double step_s = 0;                           // the steps' total
  std::map<std::string, double> category_s;    // compute, communication, pipeline idle, data, checkpoint, other
  std::map<std::string, double> phase_s;       // forward, backward, optimizer (compute's parts)
  std::map<std::string, double> wait_s;        // per wait span name ("wait allreduce"), exclusive
  double schedule_s = 0, schedule_pipeline_s = 0;  // forward-backward spans, and pipeline waits inside them
  std::map<std::string, double> comm_bytes;    // per operation on the communicators' tracks

  // The part of the steps' time spent in `category` (0..1); the mean step in ms.
  double Fraction(const std::string& category) const;
  double StepMs() const;

  // A fixed-size form for an all-gather across the ranks (labels, phases and bytes are not kept;
  // waits only per collective kind), and back.
  static constexpr size_t kPacked = 19;
  std::vector<double> Pack() const;
  static RankTime Unpack(const double* v);
};

struct TraceSummary {
  std::vector<RankTime> ranks;  // by rank
  // The table and the one-line reading (e.g. "communication-bound: 38 % of the step waits on allreduce").
  std::string Table() const;
  std::string Reading() const;
  // Fractions of the step, mean over ranks (0..1).
  double MeanFraction(const std::string& category) const;
};

// The summary's category names, in print order.
const std::vector<std::string>& TraceCategories();

// Every rank's events in one document (pid = rank; otherData.ranks = each file's labels); summary
// filled. A file that is no trace, has no step spans, or repeats a rank is InvalidInput naming it.
Result<std::string> MergeTraces(const std::vector<TraceInput>& files, TraceSummary* summary);

}  // namespace anneal
