#include "agent/health_runner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include "agent/agent_signal.h"
#include "agent/health_check.h"
#include "agent/meeting.h"
#include "protocol/api_client.h"
#include "core/env.h"
#include "launch/launcher.h"

namespace anneal {

using nlohmann::json;

class HealthRunner::Impl {
 public:
  // request: the heartbeat's "health" object. on_done is called from the runner's thread at its end.
  Impl(const AgentOptions& o, std::string address, const json& request, std::function<void()> on_done)
      : o_(o),
        instance_id_(o.instance_id),
        address_(std::move(address)),
        on_done_(std::move(on_done)),
        job_(Text(request, "job")),
        attempt_(static_cast<int>(Number(request, "attempt", 0))),
        round_(static_cast<int>(Number(request, "round", 0))),
        node_(static_cast<int>(Number(request, "node", 0))),
        nnodes_(static_cast<int>(Number(request, "nnodes", 1))) {
    const json checks = request.contains("checks") && request["checks"].is_object() ? request["checks"] : json::object();
    min_free_memory_gb_ = Number(checks, "min_free_memory_gb", 0);
    min_free_disk_gb_ = Number(checks, "min_free_disk_gb", 0);
    collective_mb_ = Number(checks, "collective_mb", 0);
    collective_timeout_s_ = Number(checks, "collective_timeout_s", 120);
    if (collective_timeout_s_ <= 0) collective_timeout_s_ = 120;
    command_ = Text(checks, "command");
    if (request.contains("addresses") && request["addresses"].is_array()) {
      for (const json& a : request["addresses"]) {
        if (a.is_string()) hosts_.push_back(a.get<std::string>());
      }
    }
    thread_ = std::thread([this] { Run(); });
  }
  // Fields of the server's request, read without throwing (absent, null or mistyped: the default).
  static double Number(const json& j, const char* key, double dflt) {
    return j.is_object() && j.contains(key) && j[key].is_number() ? j[key].get<double>() : dflt;
  }
  static std::string Text(const json& j, const char* key) {
    return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
  }
  ~Impl() {
    Stop();
    if (thread_.joinable()) thread_.join();
  }
  void Stop() {
    stop_.store(true);
    kill_.store(true);
  }
  bool done() const { return done_.load(); }
  // {"job", "attempt", "round"}: what the heartbeat reports while this runs.
  json Key() const { return {{"job", job_}, {"attempt", attempt_}, {"round", round_}}; }
  bool Is(const json& request) const {
    return Text(request, "job") == job_ && Number(request, "attempt", -1) == attempt_ &&
           Number(request, "round", -1) == round_;
  }

 private:
  std::string Who() const {
    std::string w = job_;
    w += " attempt ";
    w += std::to_string(attempt_);
    w += " round ";
    w += std::to_string(round_);
    w += " node ";
    w += std::to_string(node_);
    return w;
  }

  void Run() {
    const double t0 = o_.clock->Monotonic();
    AgentSay(Who() + ": running the pre-start health checks");
    HealthCheckOptions ho;
    ho.slots = o_.slots;
    ho.min_free_memory_gb = min_free_memory_gb_;
    ho.min_free_disk_gb = min_free_disk_gb_;
    ho.work_dir = o_.work_dir;
    ho.command = command_;
    ho.command_env = {{"ANNEAL_INSTANCE_ID", instance_id_},
                      {"ANNEAL_JOB", job_},
                      {"ANNEAL_ATTEMPT", std::to_string(attempt_)},
                      {"ANNEAL_NODE", std::to_string(node_)}};
    ho.stop = &stop_;
    json checks = RunLocalHealthChecks(ho);
    // A node whose local checks failed still joins: its peers would otherwise wait for it until their
    // timeout, and the server learns of this node's failure from this node's own result.
    checks.push_back(Collective());
    const bool ok = !stop_.load() && AllChecksOk(checks);
    // A round that failed or was abandoned starts nothing: the ports its meeting chose are let go
    // (a passed round's stay held for the start that reuses them).
    if (!ok) PortHolds::Process().ReleaseJob(job_);
    if (stop_.load()) {
      AgentSay(Who() + ": health checks abandoned (the job was stopped)");
    } else {
      const json result = {{"ok", ok}, {"checks", checks}, {"seconds", o_.clock->Monotonic() - t0}};
      AgentSay(Who() + (ok ? ": health checks passed" : ": health checks FAILED: " + DescribeFailedChecks(checks)));
      Post({{"instance", instance_id_},
            {"attempt", attempt_},
            {"round", round_},
            {"node", node_},
            {"ok", ok},
            {"result", result}});
    }
    done_.store(true);
    if (on_done_) on_done_();
  }

  // An allreduce across the job's instances: they meet through the server as a job attempt does
  // (MeetThroughServer), then each runs one rank of `anneal healthcheck` under the launcher. The whole
  // of it, meeting included, is bounded by collective_timeout_s.
  // The rank's lines: the {"healthcheck": "collective", ...} result, and the last few others (the
  // launcher's too) for a failure's detail. Written by the launcher's threads.
  struct CollectiveOutput {
    std::mutex mu;
    std::vector<std::string> tail;
    json line;
    void Keep(const std::string& l) {
      std::lock_guard<std::mutex> g(mu);
      tail.push_back(l);
      if (tail.size() > 8) tail.erase(tail.begin());
    }
    void OnLine(const std::string& l) {
      if (!l.empty() && l[0] == '{') {
        json j = json::parse(l, nullptr, false);
        if (!j.is_discarded() && j.value("healthcheck", std::string()) == "collective") {
          std::lock_guard<std::mutex> g(mu);
          line = j;
          return;
        }
      }
      Keep(l);
    }
    std::string LastLines() {
      std::lock_guard<std::mutex> g(mu);
      std::string s;
      for (const std::string& l : tail) s += (s.empty() ? "" : " | ") + l;
      return s.empty() ? s : "; last lines: " + s;
    }
    json Line() {
      std::lock_guard<std::mutex> g(mu);
      return line;
    }
  };

  static json Check(bool ok, const std::string& detail) { return {{"name", "collective"}, {"ok", ok}, {"detail", detail}}; }

  // The collective across the job's instances: they meet (under the round's key), then one rank each
  // runs `anneal healthcheck --collective-mb` under a launcher, all of it within collective_timeout_s.
  json Collective() {
    if (nnodes_ <= 1 || collective_mb_ <= 0) {
      const std::string why = nnodes_ <= 1 ? "one instance: no network between instances to check" : "collective_mb is 0";
      json c = Check(true, "skipped: " + why);
      c["skipped"] = why;
      c["seconds"] = 0.0;
      return c;
    }
    const double t0 = o_.clock->Monotonic(), deadline = t0 + collective_timeout_s_;
    json c = RunCollective(deadline);
    c["seconds"] = o_.clock->Monotonic() - t0;
    c["timeout_s"] = collective_timeout_s_;
    return c;
  }

  std::string TimedOut() const {
    return "collective timed out after " + std::to_string(static_cast<long long>(collective_timeout_s_)) +
           " s: a peer instance or the network between them is unhealthy";
  }

  json RunCollective(double deadline) {
    auto m = MeetThroughServer(o_.server_url, job_, MeetingKey{attempt_, round_}, node_, address_,
                               collective_timeout_s_, stop_, *o_.clock);
    if (stop_.load()) return Check(false, "abandoned: the job was stopped");
    if (!m.ok()) {
      if (m.status().code() == Code::kPeer && o_.clock->Monotonic() >= deadline) {
        return Check(false, TimedOut() + " (" + m.status().message() + ")");
      }
      return Check(false, "the instances could not meet through the server: " + m.status().ToString());
    }
    CollectiveOutput out;
    const double left = std::max(1.0, deadline - o_.clock->Monotonic());
    LaunchOptions lo = CollectiveLaunch(*m, left);
    lo.on_output = [&out](int, bool, const std::string& l) { out.OnLine(l); };
    bool timed_out = false;
    auto r = RunWithWatchdog(lo, deadline, [&out](const std::string& l) { out.Keep(l); }, &timed_out);
    if (stop_.load()) return Check(false, "abandoned: the job was stopped");
    if (timed_out) return Check(false, TimedOut() + out.LastLines());
    if (!r.ok()) {
      if (o_.clock->Monotonic() >= deadline - 0.5) return Check(false, TimedOut() + " (" + r.status().message() + ")");
      return Check(false, "the collective could not start: " + r.status().ToString() + out.LastLines());
    }
    const json got = out.Line();
    if (r->exit_code != 0 || !got.is_object() || !got.value("ok", false)) {
      std::string why = r->summary;
      while (!why.empty() && why.back() == '\n') why.pop_back();
      if (why.empty()) why = "the rank printed no result line";
      return Check(false, "the collective failed (exit code " + std::to_string(r->exit_code) + "): " + why + out.LastLines());
    }
    return Measured(got);
  }

  // One rank on this node, meeting the others at the meeting's address.
  LaunchOptions CollectiveLaunch(const Meeting& m, double left) {
    LaunchOptions lo;
    lo.nproc_per_node = 1;
    lo.nnodes = nnodes_;
    lo.node_rank = node_;
    lo.master_addr = m.master_addr;
    lo.master_port = m.master_port;
    lo.store_port = m.store_port;
    lo.store_bind = m.master_addr;
    lo.hosts = hosts_;
    lo.max_restarts = 0;
    lo.job = job_ + "-health";
    lo.grace_s = 1;
    lo.rendezvous_timeout_s = left;
    lo.stop = &stop_;
    lo.kill = &kill_;
    lo.first_attempt = attempt_;
    lo.allow_loopback_master = true;
    lo.workdir = o_.work_dir;
    lo.extra_env = {{"ANNEAL_INSTANCE_ID", instance_id_}};
    lo.command = {SelfExecutable(), "healthcheck", "--collective-mb", json(collective_mb_).dump(), "--timeout-s",
                  std::to_string(static_cast<long long>(std::ceil(left)))};
    return lo;
  }

  // The launcher, with a watchdog that kills the rank at the deadline (a hung peer cannot hold this
  // instance): *timed_out says whether it did.
  Result<LaunchResult> RunWithWatchdog(const LaunchOptions& lo, double deadline,
                                       const std::function<void(const std::string&)>& log, bool* timed_out) {
    std::atomic<bool> fired{false}, finished{false};
    std::mutex wd_mu;
    std::condition_variable wd_cv;
    std::thread watchdog([&] {
      std::unique_lock<std::mutex> l(wd_mu);
      while (!finished.load()) {
        if (o_.clock->Monotonic() >= deadline) {
          fired.store(true);
          kill_.store(true);
          return;
        }
        wd_cv.wait_for(l, std::chrono::milliseconds(100));  // real time: polls the clock's deadline
      }
    });
    auto r = RunLauncher(lo, log);
    {
      std::lock_guard<std::mutex> l(wd_mu);
      finished.store(true);
    }
    wd_cv.notify_all();
    watchdog.join();
    *timed_out = fired.load();
    return r;
  }

  json Measured(const json& got) const {
    const double algbw = got.value("algbw_gbps", 0.0), busbw = got.value("busbw_gbps", 0.0);
    char buf[200];
    std::snprintf(buf, sizeof(buf), "allreduce of %g MiB across %d instances: algbw %.2f GB/s, busbw %.2f GB/s (%.4f s each)",
                  collective_mb_, got.value("world", nnodes_), algbw, busbw, got.value("seconds", 0.0));
    json c = Check(true, buf);
    c["world"] = got.value("world", nnodes_);
    c["mb"] = collective_mb_;
    c["round_seconds"] = got.value("seconds", 0.0);
    c["algbw_gbps"] = algbw;
    c["busbw_gbps"] = busbw;
    return c;
  }

  void Post(const json& body) {
    const std::string path = "/v1/jobs/" + job_ + "/health";
    const double deadline = o_.clock->Monotonic() + o_.orphan_timeout_s;
    double backoff = 0.1;
    while (o_.clock->Monotonic() < deadline && !stop_.load()) {
      auto c = ApiClient::Make(o_.server_url, 10);
      if (c.ok()) {
        auto r = (*c)->Post(path, body);
        if (r.ok()) return;
        if (r.status().code() != Code::kPeer) {
          AgentSay(Who() + ": the server refused the health result: " + r.status().ToString());
          return;
        }
      }
      o_.clock->SleepFor(backoff);
      backoff = std::min(2.0, backoff * 2);
    }
    if (!stop_.load()) AgentSay(Who() + ": could not post the health result: the server stayed unreachable");
  }

  const AgentOptions& o_;
  const std::string instance_id_;  // copied: the main thread may re-register meanwhile
  std::string address_;
  std::vector<std::string> hosts_;  // the instances' addresses, by node (the request's "addresses")
  std::function<void()> on_done_;
  std::string job_;
  int attempt_ = 0, round_ = 0, node_ = 0, nnodes_ = 1;
  double min_free_memory_gb_ = 0, min_free_disk_gb_ = 0, collective_mb_ = 0, collective_timeout_s_ = 120;
  std::string command_;
  std::atomic<bool> stop_{false}, kill_{false}, done_{false};
  std::thread thread_;
};

HealthRunner::HealthRunner(const AgentOptions& o, std::string address, const json& request, std::function<void()> on_done)
    : impl_(std::make_unique<Impl>(o, std::move(address), request, std::move(on_done))) {}
HealthRunner::~HealthRunner() = default;
void HealthRunner::Stop() { impl_->Stop(); }
bool HealthRunner::done() const { return impl_->done(); }
json HealthRunner::Key() const { return impl_->Key(); }
bool HealthRunner::Is(const json& request) const { return impl_->Is(request); }

}  // namespace anneal
