#include "control/health_rounds.h"

namespace anneal {

using nlohmann::json;

std::optional<json> HealthCheckFor(const HealthPolicy& policy, const JobRecord& j, const std::vector<InstanceRecord>& mine,
                                   const std::vector<HealthRecord>& results, int round, const InstanceRecord& inst,
                                   const json& running) {
  if (!policy.enabled) return std::nullopt;
  const int count = j.spec.instance_count;
  if (static_cast<int>(mine.size()) != count) return std::nullopt;
  for (const auto& i : mine) {
    if (i.registered_at <= 0) return std::nullopt;
  }
  for (const auto& r : results) {
    if (r.instance_id == inst.id && r.result.value("round", -1) == round) return std::nullopt;
  }
  if (running.value("job", std::string()) == j.id && running.value("attempt", -1) == j.attempt &&
      running.value("round", -1) == round) {
    return std::nullopt;
  }
  json addrs = json::array();
  for (const auto& i : mine) addrs.push_back(i.address);
  return json{{"job", j.id},
              {"attempt", j.attempt},
              {"round", round},
              {"node", inst.node},
              {"nnodes", count},
              {"addresses", addrs},
              {"checks",
               {{"min_free_memory_gb", policy.min_free_memory_gb},
                {"min_free_disk_gb", policy.min_free_disk_gb},
                {"collective_mb", policy.collective_mb},
                {"collective_timeout_s", policy.collective_timeout_s},
                {"command", policy.command}}}};
}

Result<int> CurrentHealthRound(JobStore& store, const std::string& job, int attempt) {
  ANNEAL_ASSIGN_OR_RETURN(auto round, store.GetValue(HealthRoundKey(job, attempt)));
  return round ? std::stoi(*round) : 0;
}

HealthRecord HealthResultFrom(const std::string& instance, const json& body, double now) {
  HealthRecord r;
  r.instance_id = instance;
  r.node = body.value("node", 0);
  r.ok = body.value("ok", false);
  r.result = body.value("result", json::object());
  r.result["round"] = body.value("round", 0);
  r.at = now;
  return r;
}

}  // namespace anneal
