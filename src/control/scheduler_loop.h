// SchedulerLoop: runs the pure scheduler (control/scheduler.h) against the store and the backend:
// reads a view, decides, applies the decision's actions in order, keeps the Pending jobs' reasons.
// A pass runs every tick_s for timeouts and soon after any event (Wake: a submit, a registration, a
// report, a stop, a health result), passes at most kPassGapS apart, so a burst of events is served
// by one pass instead of one each (every pass reads the store while requests wait).
//
// Thread-safety: Wake, PendingReason and StartIfReady from any thread. Status writers outside the
// scheduler (a stop, a registration) hold writers() while they read and write, so that no pass
// decides from what they are changing.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "provision/instance_provider.h"
#include "control/job_store.h"
#include "control/prometheus_text.h"
#include "control/scheduler.h"

namespace anneal {

class SchedulerLoop {
 public:
  struct Hooks {
    std::function<std::map<std::string, AgentBusy>()> busy;             // the agents' last claims
    std::function<void(const std::vector<std::string>&)> wake_pool;     // a warm pool was taken
    std::function<void()> after_pass;                                   // e.g. deliver webhooks
  };
  // server_url: where obtained agents register. clock: the passes' `now` (deadlines: heartbeats, start
  // and pending timeouts, warm pools' keep-alive); the loop's own pace (tick_s) is real time.
  SchedulerLoop(JobStore* store, InstanceProvider* backend, SchedulerConfig config, std::string server_url, double server_start,
                double tick_s, Hooks hooks, Clock& clock = Clock::Real());
  ~SchedulerLoop() { Stop(); }

  void Start();  // the loop's thread
  void Stop();
  void Wake();
  // One pass now (the loop calls it; a test may too).
  Status Pass();
  // Starting -> Downloading for one job if it is ready (from its agent's heartbeat, so the agent gets
  // its assignment in the same answer).
  Status StartIfReady(const std::string& job);
  // The server's end: DecideDrain's actions, applied as a pass's are.
  Status Drain();
  std::mutex& writers() { return writers_; }
  std::optional<std::string> PendingReason(const std::string& job);
  const SchedulerConfig& config() const { return c_; }
  // How long the loop's passes took (for /metrics).
  const PromHistogram& pass_seconds() const { return pass_seconds_; }

  static constexpr double kPassGapS = 0.02;  // event-driven passes at most this often

 private:
  void Run();
  Result<SchedulerView> ReadView();
  // What step 2 reads of one active job.
  Status ReadJob(const JobRecord& j, SchedulerView* v);
  Status ReadEnded(const std::string& job, SchedulerView* v);  // an ended job whose warm pool it is
  void NotePending(SchedulerView& v, double now);
  void DeliverSpools(const std::map<std::string, std::string>& gone_dirs);
  Status Apply(const Decision& d, double now);
  Status ApplyOne(const Action& a, double now);

  JobStore* store_;
  InstanceProvider* backend_;
  const SchedulerConfig c_;
  const std::string url_;
  const double server_start_, tick_s_;
  Hooks hooks_;
  Clock& clock_;
  std::mutex writers_;  // serializes status writers: the passes, stop, register
  std::mutex mu_;       // stopped_, wake_, reasons_
  std::condition_variable cv_;
  bool stopped_ = false, wake_ = false;
  std::map<std::string, std::string> reasons_;
  std::map<std::string, double> pending_until_;  // writers_
  std::thread thread_;
  PromHistogram pass_seconds_{PromHistogram::LatencyBounds()};
};

}  // namespace anneal
