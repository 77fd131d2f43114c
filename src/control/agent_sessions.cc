#include "control/agent_sessions.h"

namespace anneal {

void AgentSessions::Claim(const std::string& instance, const AgentBusy& busy) {
  std::lock_guard<std::mutex> l(mu_);
  claims_[instance] = busy;
}

std::map<std::string, AgentBusy> AgentSessions::Claims() {
  std::lock_guard<std::mutex> l(mu_);
  return claims_;
}

void AgentSessions::Grant(const std::string& instance, const std::string& job) {
  std::lock_guard<std::mutex> l(mu_);
  grants_[instance].insert(job);
}

bool AgentSessions::Granted(const std::string& instance, const std::string& job) {
  std::lock_guard<std::mutex> l(mu_);
  auto g = grants_.find(instance);
  return g != grants_.end() && g->second.count(job) > 0;
}

bool AgentSessions::HoldUntilTaken(const std::string& instance, double seconds) {
  std::unique_lock<std::mutex> l(mu_);
  const double deadline = clock_.Monotonic() + seconds;
  while (!stopped_ && !taken_.count(instance)) {
    const double left = deadline - clock_.Monotonic();
    if (left <= 0) break;
    clock_.WaitFor(cv_, l, left);
  }
  return taken_.erase(instance) > 0;
}

void AgentSessions::Taken(const std::vector<std::string>& instances) {
  {
    std::lock_guard<std::mutex> l(mu_);
    taken_.insert(instances.begin(), instances.end());
  }
  cv_.notify_all();
}

void AgentSessions::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopped_ = true;
  }
  cv_.notify_all();
}

}  // namespace anneal
