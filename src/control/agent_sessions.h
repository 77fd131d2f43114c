// AgentSessions: what the server remembers of its agents between their calls, in memory only (a
// restarted server learns it again from the next heartbeats):
//   claims   — what each agent said it runs in its last heartbeat (the scheduler's view of a
//              Stopping job's nodes: control/scheduler.h AgentBusy);
//   grants   — the jobs the server handed each instance (run or health assignments), so an agent
//              may finish shipping a job's lines after its instance moved on; what it got, not what
//              it claims;
//   pool holds — a warm pool's agent's heartbeat waits (a long poll) until a job takes the pool, so
//              the reuse starts at once instead of at the agent's next heartbeat.
// Thread-safety: every method from any thread.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "control/scheduler.h"
#include "core/clock.h"

namespace anneal {

class AgentSessions {
 public:
  explicit AgentSessions(Clock& clock = Clock::Real()) : clock_(clock) {}

  void Claim(const std::string& instance, const AgentBusy& busy);
  std::map<std::string, AgentBusy> Claims();
  void Grant(const std::string& instance, const std::string& job);
  bool Granted(const std::string& instance, const std::string& job);
  // Waits up to `seconds` for the instance's pool to be taken (Taken) or Stop; true if taken.
  bool HoldUntilTaken(const std::string& instance, double seconds);
  void Taken(const std::vector<std::string>& instances);
  // Ends every hold (the server stops).
  void Stop();

 private:
  Clock& clock_;
  std::mutex mu_;
  std::condition_variable cv_;  // a pool was taken, or Stop
  bool stopped_ = false;
  std::map<std::string, AgentBusy> claims_;
  std::map<std::string, std::set<std::string>> grants_;
  std::set<std::string> taken_;
};

}  // namespace anneal
