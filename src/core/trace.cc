#include "core/trace.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include "core/clock.h"

namespace anneal::trace {
namespace {

using nlohmann::json;

constexpr int kFirstVirtualTrack = 1 << 24;  // above any Linux tid a small machine hands out (pid_max <= 2^22)

struct Event {
  char ph;  // 'X' or 'C'
  int tid;
  const char* cat;
  std::string name;
  double ts, dur;
  Args args;
  std::string detail;
};

struct Recorder {
  std::atomic<bool> on{false};
  std::mutex mu;
  double wall0_us = 0, mono0 = 0;
  std::vector<Event> events;
  std::map<int, std::string> thread_names;  // tid -> name (threads and virtual tracks)
  std::map<std::string, int> tracks;
};

Recorder& R() {
  static Recorder* r = new Recorder;  // never destroyed: spans may end during static destruction
  return *r;
}

int ThisTid() {
  thread_local int tid = static_cast<int>(syscall(SYS_gettid));
  return tid;
}

json ArgsJson(const Args& args, const std::string& detail) {
  json a = json::object();
  for (const auto& [k, v] : args) a[k] = v;
  if (!detail.empty()) a["detail"] = detail;
  return a;
}

}  // namespace

bool Enabled() { return R().on.load(std::memory_order_relaxed); }

void Start() {
  Recorder& r = R();
  std::lock_guard<std::mutex> l(r.mu);
  r.events.clear();
  r.mono0 = MonotonicSeconds();
  r.wall0_us = WallSeconds() * 1e6;
  r.on.store(true);
}

void Stop() { R().on.store(false); }

void Clear() {
  Recorder& r = R();
  std::lock_guard<std::mutex> l(r.mu);
  r.on.store(false);
  r.events.clear();
}

double NowUs() {
  Recorder& r = R();
  return r.wall0_us + (MonotonicSeconds() - r.mono0) * 1e6;
}

int Track(const std::string& name) {
  Recorder& r = R();
  std::lock_guard<std::mutex> l(r.mu);
  auto [it, fresh] = r.tracks.emplace(name, kFirstVirtualTrack + static_cast<int>(r.tracks.size()));
  if (fresh) r.thread_names[it->second] = name;
  return it->second;
}

void NameThisThread(const std::string& name) {
  Recorder& r = R();
  std::lock_guard<std::mutex> l(r.mu);
  r.thread_names[ThisTid()] = name;
}

void Complete(int track, const char* cat, std::string name, double start_us, double dur_us, Args args,
              std::string detail) {
  Recorder& r = R();
  if (!r.on.load(std::memory_order_relaxed)) return;
  const int tid = track < 0 ? ThisTid() : track;
  std::lock_guard<std::mutex> l(r.mu);
  r.events.push_back({'X', tid, cat, std::move(name), start_us, dur_us < 0 ? 0 : dur_us, std::move(args), std::move(detail)});
}

void Counter(const std::string& name, const Args& values) {
  Recorder& r = R();
  if (!r.on.load(std::memory_order_relaxed)) return;
  const double ts = NowUs();
  std::lock_guard<std::mutex> l(r.mu);
  r.events.push_back({'C', ThisTid(), "counter", name, ts, 0, values, ""});
}

size_t EventCount() {
  Recorder& r = R();
  std::lock_guard<std::mutex> l(r.mu);
  return r.events.size();
}

std::string ToJson(const ProcessInfo& p) {
  Recorder& r = R();
  std::lock_guard<std::mutex> l(r.mu);
  json ev = json::array();
  ev.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", p.pid}, {"tid", 0}, {"args", {{"name", p.name}}}});
  ev.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", p.pid}, {"tid", 0}, {"args", {{"sort_index", p.pid}}}});
  std::string labels;
  json other = json::object();
  for (const auto& [k, v] : p.labels) {
    labels += (labels.empty() ? "" : ", ") + k + "=" + v;
    other[k] = v;
  }
  if (!labels.empty()) {
    ev.push_back({{"ph", "M"}, {"name", "process_labels"}, {"pid", p.pid}, {"tid", 0}, {"args", {{"labels", labels}}}});
  }
  for (const auto& [tid, name] : r.thread_names) {
    ev.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", p.pid}, {"tid", tid}, {"args", {{"name", name}}}});
  }
  for (const Event& e : r.events) {
    json j = {{"ph", std::string(1, e.ph)}, {"cat", e.cat}, {"name", e.name}, {"pid", p.pid}, {"tid", e.tid}, {"ts", e.ts}};
    if (e.ph == 'X') j["dur"] = e.dur;
    j["args"] = ArgsJson(e.args, e.detail);
    ev.push_back(std::move(j));
  }
  json doc = {{"traceEvents", std::move(ev)}, {"displayTimeUnit", "ms"}, {"otherData", std::move(other)}};
  return doc.dump();
}

}  // namespace anneal::trace
