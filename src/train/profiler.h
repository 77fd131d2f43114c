// StepProfiler: the trainer's side of train.profile_steps [FROM, TO]. It turns the process's trace
// recorder (core/trace.h) on before step FROM and off after step TO, puts each of those steps under a
// "step N" span (see the trainer's loop), samples memory after each, and writes this rank's trace to
// <dir>/rank-RRRRR.trace.json (dir: train.profile_dir, else $ANNEAL_OUTPUT_DIR/profile — which the
// agent uploads with the job's output — else ./profile) with the rank's place in the layout as the
// process's labels. docs/formats/trace.md; `anneal profile` merges the ranks' files. Then every rank's
// breakdown is gathered over the world and rank 0 logs the summary ("profile: ..." lines) — the one
// `anneal profile` prints, so a job's log (and the dashboard) shows it without the files.
//
// Not thread-safe; the trainer's thread calls it. A trace that cannot be written is an error of the
// run (exit 1), named with its path.
#pragma once

#include <string>

#include "core/status.h"
#include "train/config.h"
#include "train/setup.h"
#include "train/trace_summary.h"

namespace anneal {

class StepProfiler {
 public:
  StepProfiler(const TrainConfig& c, const Runtime& rt, LogFn log);
  ~StepProfiler();
  // Before 1-based step `step` runs: recording starts at FROM; then, while recording, each step's
  // device session opens (BeginDeviceStep, inside the step's span) and closes in AfterStep.
  void BeforeStep(int step);
  void BeginDeviceStep();
  // After it ran: a memory sample; at TO the trace is written.
  Status AfterStep(int step);
  // The loop ended (a stop, fewer steps than TO): writes what was recorded, if anything.
  Status Finish();
  // The trace file's path for this rank.
  const std::string& path() const { return path_; }

 private:
  Status Write();
  Status Summarize(const TraceInput& mine);

  int from_ = 0, to_ = 0;
  bool recording_ = false;
  std::string path_;
  const Runtime& rt_;
  LogFn log_;
};

}  // namespace anneal
