#include "control/quota.h"

#include <stdexcept>

namespace anneal {

namespace {

int UserLimit(const QuotaOptions& q, const QuotaDemand& d) { return d.user_limit >= 0 ? d.user_limit : q.user_max_instances; }

int TypeLimit(const QuotaOptions& q, const std::string& type) {
  auto it = q.instance_type_max.find(type);
  return it == q.instance_type_max.end() ? 0 : it->second;
}

std::string Over(const std::string& who, int used, int need, int limit) {
  std::string s = who;
  s.append(": ").append(std::to_string(used)).append(" of ").append(std::to_string(limit));
  s.append(" instances in use, the job needs ").append(std::to_string(need));
  return s;
}

int Get(const std::map<std::string, int>& m, const std::string& k) {
  auto it = m.find(k);
  return it == m.end() ? 0 : it->second;
}

}  // namespace

std::string QuotaBlock(const QuotaOptions& q, const QuotaUsage& used, const QuotaDemand& d, bool* holds_queue) {
  *holds_queue = false;
  const int ul = UserLimit(q, d);
  if (ul > 0 && Get(used.by_user, d.user) + d.count > ul) {
    return Over("quota of user " + d.user, Get(used.by_user, d.user), d.count, ul);
  }
  const int tl = TypeLimit(q, d.type);
  if (tl > 0 && Get(used.by_type, d.type) + d.count > tl) {
    return Over("quota of instance type " + d.type, Get(used.by_type, d.type), d.count, tl);
  }
  if (q.max_running_instances > 0 && used.total + d.count > q.max_running_instances) {
    *holds_queue = true;
    return Over("overall quota", used.total, d.count, q.max_running_instances);
  }
  return "";
}

Status CheckQuotaCanFit(const QuotaOptions& q, const QuotaDemand& d) {
  auto refuse = [&](const std::string& what, int limit) {
    return InvalidInput("resources.instance_count: " + std::to_string(d.count) + " instances can never run here: " + what +
                        " is " + std::to_string(limit) + "; ask for at most " + std::to_string(limit) +
                        " or ask an admin for more");
  };
  if (q.max_instances_per_job > 0 && d.count > q.max_instances_per_job) return refuse("the per-job quota", q.max_instances_per_job);
  if (q.max_running_instances > 0 && d.count > q.max_running_instances) return refuse("the overall quota", q.max_running_instances);
  if (const int tl = TypeLimit(q, d.type); tl > 0 && d.count > tl) return refuse("the quota of instance type " + d.type, tl);
  if (const int ul = UserLimit(q, d); ul > 0 && d.count > ul) return refuse("the quota of user " + d.user, ul);
  return Status::Ok();
}

Status ParseTypeQuota(const std::string& s, std::map<std::string, int>* out) {
  const size_t eq = s.find('=');
  if (eq == std::string::npos || eq == 0) return InvalidInput("--quota-instance-type '" + s + "' must be TYPE=COUNT, e.g. gpu=8");
  try {
    const int n = std::stoi(s.substr(eq + 1));
    if (n < 0) throw std::out_of_range("negative");
    (*out)[s.substr(0, eq)] = n;
  } catch (...) {
    return InvalidInput("--quota-instance-type '" + s + "': the count must be a whole number >= 0");
  }
  return Status::Ok();
}

}  // namespace anneal
