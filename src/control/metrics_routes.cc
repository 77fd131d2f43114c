#include "control/metrics_routes.h"

#include <map>
#include <optional>
#include <set>
#include <string>

#include "anneal_version.h"
#include "control/http_util.h"
#include "control/prometheus_text.h"
#include "core/clock.h"

namespace anneal {

namespace {

class MetricsRoutes : public RoutePart {
 public:
  explicit MetricsRoutes(ServerContext& c) : c_(c) {}

  void Add(httplib::Server& h) {
    h.Get("/metrics", Guarded(c_.store, Access::kUser, [this](const httplib::Request&, httplib::Response& res, const Principal& p) {
      if (!p.reads_all()) {
        return ReplyError(res, 403, "/metrics shows every job: use an admin's or a viewer's token (e.g. anneal users add "
                                    "prometheus --role viewer, and give Prometheus that token in a file)");
      }
      PromText t;
      Status st = Write(&t);
      if (!st.ok()) return ReplyError(res, 500, st.message());
      res.set_content(t.text(), "text/plain; version=0.0.4; charset=utf-8");
    }));
  }

 private:
  Status Write(PromText* t) {
    t->Family("anneal_build_info", "gauge", "The server's version (always 1)");
    t->Sample("anneal_build_info", {{"version", ANNEAL_VERSION}, {"backend", c_.o.backend}}, 1);
    ANNEAL_RETURN_IF_ERROR(WriteJobs(t));
    t->Family("anneal_scheduler_pass_seconds", "histogram", "How long each scheduler pass took");
    c_.scheduler->pass_seconds().Write(t, "anneal_scheduler_pass_seconds", {});
    if (c_.requests) c_.requests->Write(t);
    if (c_.guard) c_.guard->Write(t);  // connections refused, header deadlines passed
    ANNEAL_RETURN_IF_ERROR(WriteInstances(t));
    return WriteTraining(t);
  }

  Status WriteJobs(PromText* t) {
    ANNEAL_ASSIGN_OR_RETURN(auto counts, c_.store->CountJobsByPhase());
    t->Family("anneal_jobs", "gauge", "Jobs by primary and secondary status");
    for (int i = 0; i <= static_cast<int>(JobPhase::kMaxRuntimeExceeded); ++i) {
      const auto phase = static_cast<JobPhase>(i);
      auto it = counts.find(PhaseName(phase));
      t->Sample("anneal_jobs", {{"status", PrimaryStatus(phase)}, {"secondary_status", PhaseName(phase)}},
                it == counts.end() ? 0.0 : static_cast<double>(it->second));
    }
    ANNEAL_ASSIGN_OR_RETURN(auto oldest, c_.store->PendingJobs(1));
    const auto pending = counts.find(PhaseName(JobPhase::kPending));
    t->Family("anneal_queue_length", "gauge", "Jobs waiting for instances (Pending)");
    t->Sample("anneal_queue_length", {}, pending == counts.end() ? 0.0 : static_cast<double>(pending->second));
    t->Family("anneal_queue_oldest_pending_seconds", "gauge", "How long the oldest Pending job has waited (0: none)");
    t->Sample("anneal_queue_oldest_pending_seconds", {}, oldest.empty() ? 0.0 : c_.clock->Wall() - oldest[0].created_at);
    return Status::Ok();
  }

  Status WriteInstances(PromText* t) {
    ANNEAL_ASSIGN_OR_RETURN(auto insts, c_.store->Instances());
    std::map<std::pair<std::string, std::string>, int> by_state;
    for (const InstanceRecord& r : insts) ++by_state[{InstanceStateName(r.state), r.backend}];
    t->Family("anneal_instances", "gauge", "Instances by state and backend");
    for (const auto& [k, n] : by_state) t->Sample("anneal_instances", {{"state", k.first}, {"backend", k.second}}, n);
    t->Family("anneal_instance_heartbeat_age_seconds", "gauge", "Seconds since each live instance's agent last called in");
    const double now = c_.clock->Wall();
    for (const InstanceRecord& r : insts) {
      if (r.state == InstanceState::kReleased || r.last_heartbeat <= 0) continue;
      t->Sample("anneal_instance_heartbeat_age_seconds", {{"instance", r.id}, {"anneal_job", r.job_id}}, now - r.last_heartbeat);
    }
    return Status::Ok();
  }

  // One family, anneal_job_metric{anneal_job, node, rank, name}: each active job's newest value of each
  // of its metrics (regex-defined, step times, the instances' system samples with rank -1). Names
  // stay labels: they are the job's and the agents' own words, not Prometheus metric names.
  Status WriteTraining(PromText* t) {
    ANNEAL_ASSIGN_OR_RETURN(auto jobs, c_.store->ActiveJobs());
    t->Family("anneal_job_metric", "gauge",
              "The newest value of each metric of each active job, by node and rank (rank -1: the instance's own)");
    std::set<std::string> active;
    for (const JobRecord& j : jobs) {
      active.insert(j.id);
      // A queued job has no agent yet, so no metric to show: no store query for each of thousands of
      // Pending jobs on every scrape (fuzzing the API found a scrape of 12 s behind a long queue).
      if (j.phase == JobPhase::kPending) continue;
      std::optional<std::vector<MetricPoint>> points = c_.latest ? c_.latest->Of(j.id) : std::nullopt;
      if (!points) {  // none arrived since the server started: once from the store
        ANNEAL_ASSIGN_OR_RETURN(points, c_.store->LatestMetrics(j.id));
        if (c_.latest) c_.latest->Note(j.id, *points);
      }
      for (const MetricPoint& p : *points) {
        t->Sample("anneal_job_metric",
                  {{"anneal_job", j.id}, {"node", std::to_string(p.node)}, {"rank", std::to_string(p.rank)}, {"name", p.name}},
                  p.value);
      }
    }
    if (c_.latest) c_.latest->KeepOnly(active);
    return Status::Ok();
  }

  ServerContext& c_;
};

}  // namespace

std::unique_ptr<RoutePart> AddMetricsRoutes(httplib::Server& h, ServerContext& c) {
  auto r = std::make_unique<MetricsRoutes>(c);
  r->Add(h);
  return r;
}

}  // namespace anneal
