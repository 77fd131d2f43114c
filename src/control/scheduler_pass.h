// SchedulerPass: the working state of one scheduler pass (control/scheduler.h). It starts as a copy
// of the view; each write the pass decides is recorded as an action and applied to the copy at once,
// so that every later step sees it, as it would see the store after the write. Private to
// control/scheduler*.cc.
#pragma once

#include <string>
#include <vector>

#include "protocol/exit_cause.h"
#include "control/scheduler.h"

namespace anneal {

class SchedulerPass {
 public:
  SchedulerPass(const SchedulerConfig& c, const SchedulerView& v, double now);
  Decision Take() { return std::move(d_); }

  // The steps (scheduler.h), in the order Decide runs them.
  void ForgetGone();
  void ExpireWarmPools();
  void MoveRunningJobs();
  void PlaceQueue();
  // Step 2 for one Starting job (DecideStart, and from MoveRunningJobs).
  void StartIfReady(JobRecord& j);
  // The server's end (DecideDrain).
  void Drain();
  JobRecord* Job(const std::string& id);

 private:
  // Step 2 (control/scheduler_progress.cc).
  void Starting(JobRecord& j);
  void DecideHealth(JobRecord& j, const std::vector<InstanceRecord>& mine);
  void ReplaceUnhealthy(JobRecord& j, const std::vector<InstanceRecord>& bad, int round, const std::string& what);
  void Progress(JobRecord& j, const std::vector<InstanceRecord>& mine);
  bool FailedNode(JobRecord& j, const std::vector<NodeReport>& reports, const std::vector<InstanceRecord>& mine);
  void StoppingJob(JobRecord& j, const std::vector<NodeReport>& reports, const std::vector<InstanceRecord>& mine);
  void Interrupt(JobRecord& j, const std::string& reason, const std::vector<InstanceRecord>& mine);
  void FailOrRetry(JobRecord& j, ExitCause cause, const std::string& reason, int exit_code,
                   const std::vector<InstanceRecord>& mine);
  void Finish(JobRecord& j, JobPhase to, const std::string& reason, int exit_code,
              const std::vector<InstanceRecord>& mine, bool keep_warm = true);
  // Step 3 and warm pools (control/scheduler.cc).
  bool Place(JobRecord& j);
  bool Obtain(JobRecord& j);
  bool AssignJoined(JobRecord& j);
  bool MakeRoom(const std::string& for_job, int count);
  void ReusePool(JobRecord& j, const std::string& from, std::vector<InstanceRecord> pool);
  void EndWarmPool(const std::string& from, const std::vector<InstanceRecord>& pool, const std::string& status,
                   const std::string& why);
  void Release(const std::vector<InstanceRecord>& mine);

  // Reads of the working state.
  std::vector<InstanceRecord> Mine(const std::string& job) const;  // holding it now, by node
  const InstanceRecord* Instance(const std::string& id) const;
  // Obtained by the backend (released through it), as opposed to an agent that joined by itself.
  static bool Obtained(const InstanceRecord& i);
  std::string PendingWhy(const JobRecord& j) const;
  double Since(double t) const;  // seconds from t (at the earliest the server's start) to now

  // Writes: recorded, and applied to the working state.
  void Transition(JobRecord& j, JobPhase to, const std::string& message, const std::string& failure = "",
                  int exit_code = -1, StopCause stop = StopCause::kNone);
  void SetAttempt(JobRecord& j, int attempt);
  void Put(const InstanceRecord& r);
  void Forget(const std::string& id);
  void Claim(const InstanceRecord& r);  // Put of a requested instance, forgetting an old record under its id
  void SetWarmPool(const std::string& job, const nlohmann::json& pool);
  void SetValue(const std::string& key, const std::string& value);

  const SchedulerConfig& c_;
  const SchedulerView& v_;
  const double now_;
  std::vector<JobRecord> active_, pending_;
  std::map<std::string, JobRecord> ended_;
  std::vector<InstanceRecord> insts_;
  std::map<std::string, int> round_;
  std::map<std::string, std::string> pool_from_;
  Decision d_;
};

}  // namespace anneal
