#include "train/profiler.h"

#include <unistd.h>

#include <cstdio>

#include "core/env.h"
#include "core/trace.h"
#include "tensor/device_trace.h"
#include "train/trace_summary.h"

namespace anneal {
namespace {

// This process's resident memory, MB (/proc/self/statm's second field).
double ResidentMb() {
  long pages_total = 0, pages_resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  const int n = std::fscanf(f, "%ld %ld", &pages_total, &pages_resident);
  std::fclose(f);
  return n == 2 ? static_cast<double>(pages_resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / 1e6 : 0;
}

std::string TraceDir(const TrainConfig& c, const RankContract& re) {
  if (!c.train.profile_dir.empty()) return c.train.profile_dir;
  if (!re.output_dir.empty()) return re.output_dir + "/profile";
  return "profile";
}

}  // namespace

StepProfiler::StepProfiler(const TrainConfig& c, const Runtime& rt, LogFn log)
    : from_(c.train.profile_from), to_(c.train.profile_to), rt_(rt), log_(std::move(log)) {
  char name[32];
  std::snprintf(name, sizeof(name), "/rank-%05d.trace.json", rt.re.rank);
  path_ = TraceDir(c, rt.re) + name;
}

StepProfiler::~StepProfiler() {
  if (recording_) trace::Stop();
}

void StepProfiler::BeforeStep(int step) {
  if (from_ == 0 || step != from_ || recording_) return;
  trace::Start();
  trace::NameThisThread("main");
  recording_ = true;
}

// A step traced on a device also gets its spans in the device's time (tensor/device_trace.h).
void StepProfiler::BeginDeviceStep() {
  if (recording_ && rt_.be) device_trace::Begin(rt_.be->timing_marks(), rt_.model->stream(), rt_.be->name() + " compute stream");
}

Status StepProfiler::AfterStep(int step) {
  if (!recording_) return Status::Ok();
  device_trace::Flush();
  trace::Counter("memory", {{"resident_mb", ResidentMb()}});
  if (step < to_) return Status::Ok();
  return Write();
}

Status StepProfiler::Finish() { return recording_ ? Write() : Status::Ok(); }

Status StepProfiler::Write() {
  device_trace::Flush();
  trace::Stop();
  recording_ = false;
  const ProcessGroups& pg = *rt_.pg;
  trace::ProcessInfo p;
  p.pid = rt_.re.rank;
  p.name = "rank " + std::to_string(rt_.re.rank);
  char host[256] = {0};
  (void)gethostname(host, sizeof(host) - 1);
  p.labels = {{"rank", std::to_string(rt_.re.rank)},       {"world", std::to_string(rt_.re.world)},
              {"dp_rank", std::to_string(pg.dp_rank())},   {"tp_rank", std::to_string(pg.tp_rank())},
              {"pp_rank", std::to_string(pg.pp_rank())},   {"dp", std::to_string(pg.dp())},
              {"tp", std::to_string(pg.tp())},             {"pp", std::to_string(pg.pp())},
              {"node", std::to_string(rt_.re.node_rank)},  {"host", host},
              {"job", rt_.re.job},                         {"attempt", std::to_string(rt_.re.attempt)},
              {"steps", std::to_string(from_) + "-" + std::to_string(to_)}};
  const size_t events = trace::EventCount();
  const std::string text = trace::ToJson(p);
  trace::Clear();
  Status written = Env::Default().CreateDirs(path_.substr(0, path_.rfind('/')));
  if (written.ok()) written = Env::Default().WriteFileAtomic(path_, text);
  // Every rank takes part in the summary's all-gather, whatever its own write did.
  Status summarized = Summarize(TraceInput{path_, text});
  if (!written.ok()) {
    return Internal("train.profile_steps: the trace " + path_ + " could not be written: " + written.message() +
                    " (set train.profile_dir to a writable folder)");
  }
  if (rt_.re.rank == 0) {
    log_("profile: steps " + std::to_string(from_) + "-" + std::to_string(to_) + " traced (" + std::to_string(events) +
         " events on rank 0) to " + path_ + "; anneal profile merges every rank's");
  }
  return summarized;
}

// Each rank's breakdown of its own trace, gathered to rank 0, which prints the summary that
// `anneal profile` would print of the merged files (less the labels a rank does not share).
Status StepProfiler::Summarize(const TraceInput& mine) {
  TraceSummary own;
  const bool ok = MergeTraces({mine}, &own).ok() && own.ranks.size() == 1;
  std::vector<double> packed = ok ? own.ranks[0].Pack() : std::vector<double>(RankTime::kPacked, 0.0);
  packed[0] = rt_.re.rank;
  std::vector<double> all(packed.size() * rt_.re.world);
  if (Communicator* w = rt_.world()) {
    ANNEAL_RETURN_IF_ERROR(w->AllGatherBytes(packed.data(), packed.size() * sizeof(double), all.data()));
  } else {
    all = packed;
  }
  if (rt_.re.rank != 0) return Status::Ok();
  TraceSummary s;
  for (int r = 0; r < rt_.re.world; ++r) {
    RankTime t = RankTime::Unpack(all.data() + r * RankTime::kPacked);
    if (t.steps > 0) s.ranks.push_back(std::move(t));
  }
  if (s.ranks.empty()) return Status::Ok();
  std::string table = s.Table();
  for (size_t at = 0, nl; (nl = table.find('\n', at)) != std::string::npos; at = nl + 1) {
    log_("profile: " + table.substr(at, nl - at));
  }
  return Status::Ok();
}

}  // namespace anneal
