#include "train/trace_summary.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "core/bounded_parse.h"
#include "train/report.h"

namespace anneal {
namespace {

using nlohmann::json;

constexpr double kSlackUs = 1.0;  // timestamps are doubles of wall-clock microseconds: nesting within 1 us

struct Span {
  std::string cat, name;
  double ts = 0, dur = 0;
  double child_us = 0;  // the direct children's total
};

const char* CategoryOf(const std::string& cat) {
  if (cat == "forward" || cat == "backward" || cat == "optimizer") return "compute";
  if (cat == "comm") return "communication";
  if (cat == "pipeline") return "pipeline idle";
  if (cat == "data") return "data";
  if (cat == "checkpoint") return "checkpoint";
  return "other";
}

// One rank's main-thread spans (sorted by start, outer first) into its RankTime.
void Account(std::vector<Span>& spans, RankTime* t) {
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.ts != b.ts ? a.ts < b.ts : a.dur > b.dur; });
  std::vector<size_t> stack;  // indexes of the open ancestors
  std::vector<int> parent(spans.size(), -1);
  std::vector<bool> in_step(spans.size(), false);
  for (size_t i = 0; i < spans.size(); ++i) {
    while (!stack.empty() && spans[i].ts >= spans[stack.back()].ts + spans[stack.back()].dur - kSlackUs &&
           !(spans[i].dur == 0 && spans[i].ts < spans[stack.back()].ts + spans[stack.back()].dur)) {
      stack.pop_back();
    }
    if (!stack.empty()) {
      parent[i] = static_cast<int>(stack.back());
      spans[stack.back()].child_us += spans[i].dur;
      in_step[i] = in_step[stack.back()];
    }
    if (spans[i].cat == "step") in_step[i] = true;
    stack.push_back(i);
  }
  for (size_t i = 0; i < spans.size(); ++i) {
    if (!in_step[i]) continue;
    const Span& s = spans[i];
    const double self_s = std::max(0.0, s.dur - s.child_us) / 1e6;
    if (s.cat == "step" && parent[i] < 0) {
      ++t->steps;
      t->step_s += s.dur / 1e6;
    }
    t->category_s[CategoryOf(s.cat)] += self_s;
    if (std::string(CategoryOf(s.cat)) == "compute") t->phase_s[s.cat] += self_s;
    if (s.cat == "comm" || s.cat == "pipeline") t->wait_s[s.name] += self_s;
    if (s.cat == "schedule") t->schedule_s += s.dur / 1e6;
    if (s.cat == "pipeline") {
      for (int p = parent[i]; p >= 0; p = parent[p]) {
        if (spans[p].cat == "schedule") {
          t->schedule_pipeline_s += self_s;
          break;
        }
      }
    }
  }
}

// One trace event's fields, each of its type: ph and pid (a rank, >= 0) required; cat, name, ts, dur,
// tid and args.bytes optional. Another type is InvalidInput naming the file, the event and the field.
struct Event {
  std::string ph;
  int pid = 0;
  long long tid = 0;
  Span span;
  double bytes = 0;
};

Status ReadEvent(const json& e, size_t i, const std::string& file, Event* out) {
  const std::string where = file + ": event " + std::to_string(i);
  if (!e.is_object() || !e.contains("ph") || !e.contains("pid")) return InvalidInput(where + " has no ph or pid");
  auto bad = [&](const char* field, const char* want) {
    return InvalidInput(where + ": " + field + " must be " + want + ", not " + e[field].dump().substr(0, 40));
  };
  int64_t pid = 0, tid = 0;
  if (!e["ph"].is_string()) return bad("ph", "a string");
  if (!JsonIntIn(e["pid"], 0, INT32_MAX, &pid)) return bad("pid", "a rank (a whole number >= 0)");
  if (e.contains("tid") && !JsonIntIn(e["tid"], INT64_MIN, INT64_MAX, &tid)) return bad("tid", "a whole number");
  for (const char* f : {"cat", "name"}) {
    if (e.contains(f) && !e[f].is_string()) return bad(f, "a string");
  }
  for (const char* f : {"ts", "dur"}) {
    if (e.contains(f) && !(e[f].is_number() && std::isfinite(e[f].get<double>()))) return bad(f, "a number");
  }
  if (e.contains("args") && !e["args"].is_object()) return bad("args", "an object");
  const json bytes = e.contains("args") ? e["args"].value("bytes", json(0.0)) : json(0.0);
  if (!bytes.is_number()) return InvalidInput(where + ": args.bytes must be a number");
  out->ph = e["ph"].get<std::string>();
  out->pid = static_cast<int>(pid);
  out->tid = tid;
  out->span = Span{e.value("cat", std::string()), e.value("name", std::string()), e.value("ts", 0.0), e.value("dur", 0.0)};
  out->bytes = bytes.get<double>();
  return Status::Ok();
}

Result<RankTime> ReadRank(const TraceInput& f, json* events) {
  json doc;
  try {
    doc = json::parse(f.text);
  } catch (const json::exception& e) {
    return InvalidInput(f.name + ": not JSON (" + std::string(e.what()) + "): a rank's trace is Chrome's Trace Event Format");
  }
  if (!doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array()) {
    return InvalidInput(f.name + ": no traceEvents array: not a trace written by train.profile_steps");
  }
  RankTime t;
  t.rank = -1;
  if (doc.contains("otherData") && doc["otherData"].is_object()) {
    for (const auto& [k, v] : doc["otherData"].items()) t.labels[k] = v.is_string() ? v.get<std::string>() : v.dump();
  }
  std::map<long long, std::vector<Span>> by_tid;
  std::map<long long, bool> has_step;
  size_t index = 0;
  for (const json& e : doc["traceEvents"]) {
    Event ev;
    ANNEAL_RETURN_IF_ERROR(ReadEvent(e, index++, f.name, &ev));
    if (t.rank < 0) t.rank = ev.pid;
    if (ev.pid != t.rank) return InvalidInput(f.name + ": events of two processes: one rank's file was expected");
    events->push_back(e);
    if (ev.ph != "X") continue;
    if (ev.span.cat == "comm" && ev.tid >= (1 << 24)) t.comm_bytes[ev.span.name] += ev.bytes;
    if (ev.span.cat == "step") has_step[ev.tid] = true;
    by_tid[ev.tid].push_back(std::move(ev.span));
  }
  if (has_step.empty()) return InvalidInput(f.name + ": no step spans: was train.profile_steps inside the steps that ran?");
  Account(by_tid[has_step.begin()->first], &t);
  return t;
}

// The collectives a rank may wait on, as Pack keeps them.
const std::vector<std::string>& WaitKinds() {
  static const std::vector<std::string> k = {"allreduce", "reduce-scatter", "all-gather", "broadcast", "barrier"};
  return k;
}

// "wait allreduce(f64)" -> "allreduce"
std::string WaitKind(const std::string& name) {
  std::string n = name.rfind("wait ", 0) == 0 ? name.substr(5) : name;
  const size_t paren = n.find('(');
  return paren == std::string::npos ? n : n.substr(0, paren);
}

}  // namespace

std::vector<double> RankTime::Pack() const {
  std::vector<double> v = {static_cast<double>(rank), static_cast<double>(steps), step_s, schedule_s, schedule_pipeline_s};
  for (const std::string& c : TraceCategories()) {
    auto it = category_s.find(c);
    v.push_back(it == category_s.end() ? 0 : it->second);
  }
  for (const std::string& k : WaitKinds()) {
    double sum = 0;
    for (const auto& [n, sec] : wait_s) sum += WaitKind(n) == k ? sec : 0;
    v.push_back(sum);
  }
  for (const char* k : {"dp_rank", "tp_rank", "pp_rank"}) v.push_back(labels.count(k) ? std::atof(labels.at(k).c_str()) : -1);
  return v;
}

RankTime RankTime::Unpack(const double* v) {
  RankTime t;
  t.rank = static_cast<int>(v[0]);
  t.steps = static_cast<int>(v[1]);
  t.step_s = v[2];
  t.schedule_s = v[3];
  t.schedule_pipeline_s = v[4];
  size_t i = 5;
  for (const std::string& c : TraceCategories()) t.category_s[c] = v[i++];
  for (const std::string& k : WaitKinds()) t.wait_s["wait " + k] = v[i++];
  for (const char* k : {"dp_rank", "tp_rank", "pp_rank"}) {
    if (v[i] >= 0) t.labels[k] = std::to_string(static_cast<int>(v[i]));
    ++i;
  }
  return t;
}

const std::vector<std::string>& TraceCategories() {
  static const std::vector<std::string> k = {"compute", "communication", "pipeline idle", "data", "checkpoint", "other"};
  return k;
}

Result<std::string> MergeTraces(const std::vector<TraceInput>& files, TraceSummary* summary) {
  if (files.empty()) return InvalidInput("no trace files: run with train.profile_steps: [FROM, TO]");
  json events = json::array(), ranks = json::array();
  summary->ranks.clear();
  for (const TraceInput& f : files) {
    ANNEAL_ASSIGN_OR_RETURN(RankTime t, ReadRank(f, &events));
    for (const RankTime& o : summary->ranks) {
      if (o.rank == t.rank) return InvalidInput(f.name + ": rank " + std::to_string(t.rank) + " appears twice");
    }
    json l = json::object();
    for (const auto& [k, v] : t.labels) l[k] = v;
    ranks.push_back(l);
    summary->ranks.push_back(std::move(t));
  }
  std::sort(summary->ranks.begin(), summary->ranks.end(), [](const RankTime& a, const RankTime& b) { return a.rank < b.rank; });
  json doc = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}, {"otherData", {{"ranks", std::move(ranks)}}}};
  return doc.dump();
}

double RankTime::Fraction(const std::string& category) const {
  auto it = category_s.find(category);
  return step_s > 0 && it != category_s.end() ? it->second / step_s : 0;
}

double RankTime::StepMs() const { return steps ? 1e3 * step_s / steps : 0; }

double TraceSummary::MeanFraction(const std::string& category) const {
  double sum = 0;
  for (const RankTime& r : ranks) sum += r.Fraction(category);
  return ranks.empty() ? 0 : sum / ranks.size();
}

std::string TraceSummary::Table() const {
  std::string out = "where the step time goes (" + std::to_string(ranks.size()) + " rank(s), mean over ranks; min-max):\n";
  for (const std::string& c : TraceCategories()) {
    double lo = 1, hi = 0;
    for (const RankTime& r : ranks) lo = std::min(lo, r.Fraction(c)), hi = std::max(hi, r.Fraction(c));
    out += Fmt("  %-14s %5.1f %%   (%.1f-%.1f)\n", c.c_str(), 100 * MeanFraction(c), 100 * lo, 100 * hi);
  }
  out += "per rank:\n";
  for (const RankTime& r : ranks) {
    std::string where;  // "dp 0, tp 0, pp 1, host": the labels the rank has
    for (const auto& [key, shown] : {std::pair{"dp_rank", "dp "}, {"tp_rank", "tp "}, {"pp_rank", "pp "}, {"host", ""}}) {
      if (r.labels.count(key)) where += (where.empty() ? "" : ", ") + std::string(shown) + r.labels.at(key);
    }
    out += Fmt("  rank %d (%s): %d steps, %.1f ms/step; compute %.1f %%, comm %.1f %%, pipeline %.1f %%", r.rank,
               where.c_str(), r.steps, r.StepMs(), 100 * r.Fraction("compute"), 100 * r.Fraction("communication"),
               100 * r.Fraction("pipeline idle"));
    if (r.schedule_s > 0 && r.schedule_pipeline_s > 0) out += Fmt("; pipeline idle of the schedule %.1f %%", 100 * r.schedule_pipeline_s / r.schedule_s);
    out += "\n";
  }
  if (ranks.size() > 1) {
    auto by_ms = [](const RankTime& a, const RankTime& b) { return a.StepMs() < b.StepMs(); };
    const RankTime& slow = *std::max_element(ranks.begin(), ranks.end(), by_ms);
    const RankTime& fast = *std::min_element(ranks.begin(), ranks.end(), by_ms);
    out += Fmt("slowest rank: %d (%.1f ms/step, %+.1f %% over the fastest)\n", slow.rank, slow.StepMs(),
               100 * (slow.StepMs() / std::max(1e-12, fast.StepMs()) - 1));
  }
  return out + "reading: " + Reading() + "\n";
}

std::string TraceSummary::Reading() const {
  std::string worst;
  double wf = 0;
  for (const std::string& c : TraceCategories()) {
    if (c == "compute" || c == "other") continue;
    if (MeanFraction(c) > wf) wf = MeanFraction(c), worst = c;
  }
  const double compute = MeanFraction("compute");
  if (worst.empty() || wf < 0.15 || wf < compute / 3) {
    return Fmt("compute-bound: %.0f %% of the step is forward, backward and the optimizer", 100 * compute);
  }
  const std::string pct = Fmt("%.0f %%", 100 * wf);
  if (worst == "communication") {
    std::map<std::string, double> waits;
    for (const RankTime& r : ranks) {
      for (const auto& [n, s] : r.wait_s) {
        if (n.rfind("wait ", 0) == 0 || n == "allreduce") waits[n] += s;
      }
    }
    std::string op = "collectives";
    double best = -1;
    for (const auto& [n, s] : waits) {
      if (s > best) best = s, op = n.rfind("wait ", 0) == 0 ? n.substr(5) : n;
    }
    return "communication-bound: " + pct + " of the step waits on " + op;
  }
  if (worst == "pipeline idle") return "pipeline-bound: " + pct + " of the step waits on the other stages (the pipeline bubble)";
  if (worst == "data") return "data-bound: " + pct + " of the step waits on the data loader";
  return "checkpoint-bound: " + pct + " of the step is spent taking checkpoints";
}

}  // namespace anneal
