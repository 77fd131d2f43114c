// The agent's heartbeat loop (issue 35: its own file, its actions typed): register with the server
// (the join secret buys an instance token), then heartbeat every heartbeat_s, acting on each answer
// — run (start a JobRunner), health (a HealthRunner), stop (what runs), exit (released) — and start
// the anneal exec sessions it carries. A server that is away is retried; past the orphan timeout a
// running job is stopped (its ranks checkpoint) and an idle agent exits with a PeerError.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent/agent.h"
#include "agent/exec_runner.h"
#include "agent/health_runner.h"
#include "agent/job_runner.h"
#include "protocol/api_client.h"
#include "protocol/wire.h"

namespace anneal {

class HeartbeatLoop {
 public:
  // o: the agent's options (work_dir absolute, sandbox_unavailable known); address: advertised to
  // peers; join: the join token or the instance's one-time secret.
  HeartbeatLoop(AgentOptions o, std::string address, std::string join, std::unique_ptr<ApiClient> client);
  // Until the server says exit (Ok), a signal (Ok), a refused registration (InvalidInput) or a server
  // away past the orphan timeout with nothing running (PeerError). Stops what runs before returning.
  Status Run();

 private:
  Status Register();                         // Cancelled: the server refused this agent
  Result<HeartbeatReply> Beat();             // NotFound: the server lost this agent (join again)
  bool Act(HeartbeatReply& reply);           // false: released (exit)
  bool Unreachable(const Status& st, Status* result);  // false: give up (result set)
  void Reap();
  void WaitFor(double seconds);
  void Wake();

  AgentOptions o_;
  std::string address_, join_, id_;
  std::unique_ptr<ApiClient> client_;
  std::mutex wake_mu_;
  std::condition_variable wake_;
  std::unique_ptr<JobRunner> runner_;
  std::unique_ptr<HealthRunner> health_;           // a pre-start health check in progress
  std::vector<std::unique_ptr<ExecRunner>> execs_;  // anneal exec sessions into the job
  bool registered_ = false, orphan_stop_ = false;
  double unreachable_since_ = -1;
};

}  // namespace anneal
