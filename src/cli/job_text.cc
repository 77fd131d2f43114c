#include "cli/job_text.h"

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <limits>
#include <map>

#include "protocol/wire.h"

namespace anneal::cli {

using nlohmann::json;

namespace {

const json* Value(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

// printf into a string.
void Appendf(std::string* out, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void Appendf(std::string* out, const char* fmt, ...) {
  char small[512];
  va_list a;
  va_start(a, fmt);
  va_list b;
  va_copy(b, a);
  const int n = std::vsnprintf(small, sizeof(small), fmt, a);
  va_end(a);
  if (n < 0) {
    va_end(b);
    return;
  }
  if (static_cast<size_t>(n) < sizeof(small)) {
    out->append(small, static_cast<size_t>(n));
  } else {
    std::string big(static_cast<size_t>(n) + 1, '\0');
    std::vsnprintf(big.data(), big.size(), fmt, b);
    out->append(big.data(), static_cast<size_t>(n));
  }
  va_end(b);
}

// A string field's text; what JSON cannot carry as text (a non-UTF-8 byte from a careless server)
// never reaches here: the reply was parsed, so its strings are UTF-8.
std::string Str(const json& j, const char* key) { return Field(j, key, std::string()); }

}  // namespace

std::string Field(const json& j, const char* key, const std::string& def) {
  const json* v = Value(j, key);
  return v && v->is_string() ? v->get<std::string>() : def;
}

std::string Field(const json& j, const char* key, const char* def) { return Field(j, key, std::string(def)); }

double Field(const json& j, const char* key, double def) {
  const json* v = Value(j, key);
  return v && v->is_number() ? v->get<double>() : def;
}

int64_t Field(const json& j, const char* key, int64_t def) {
  const json* v = Value(j, key);
  if (!v) return def;
  if (v->is_number_integer()) return v->get<int64_t>();  // unsigned past int64 wraps: clamped below
  if (v->is_number_unsigned()) return def;
  if (v->is_number_float()) {
    const double d = v->get<double>();
    return std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e18 ? static_cast<int64_t>(d) : def;
  }
  return def;
}

int Field(const json& j, const char* key, int def) {
  const int64_t v = Field(j, key, static_cast<int64_t>(def));
  return v >= std::numeric_limits<int>::min() && v <= std::numeric_limits<int>::max() ? static_cast<int>(v) : def;
}

bool Field(const json& j, const char* key, bool def) {
  const json* v = Value(j, key);
  return v && v->is_boolean() ? v->get<bool>() : def;
}

const json& Items(const json& j, const char* key) {
  static const json kEmpty = json::array();
  const json* v = Value(j, key);
  return v && v->is_array() ? *v : kEmpty;
}

const json& Member(const json& j, const char* key) {
  static const json kEmpty = json::object();
  const json* v = Value(j, key);
  return v && v->is_object() ? *v : kEmpty;
}

std::string Clock(double wall) { return wall > 0 && wall < 253402300800.0 ? FormatTime(wall).substr(11, 8) : "-"; }

std::string Duration(double s) {
  if (!(s >= 0) || s > 1e12) return "-";
  char b[32];
  if (s < 60) {
    std::snprintf(b, sizeof(b), "%.1fs", s);
  } else if (s < 3600) {
    std::snprintf(b, sizeof(b), "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  } else {
    std::snprintf(b, sizeof(b), "%lldh%02dm", static_cast<long long>(s) / 3600, static_cast<int>(static_cast<long long>(s) / 60 % 60));
  }
  return b;
}

std::string LinePrefix(const json& x) {
  const int rank = Field(x, "rank", -1);
  if (rank < 0) return "[agent node " + std::to_string(Field(x, "node", 0)) + "] ";
  return "[rank " + std::to_string(rank) + "] ";
}

namespace {

std::string When(double wall) { return wall > 0 && wall < 253402300800.0 ? FormatTime(wall) : "-"; }

std::string CommandText(const json& entrypoint) {
  const json* c = Value(entrypoint, "command");
  if (!c) return "";
  if (c->is_string()) return c->get<std::string>();
  std::string cmd;
  if (c->is_array()) {
    for (const json& a : *c) {
      if (!cmd.empty()) cmd.push_back(' ');
      cmd.append(a.is_string() ? a.get<std::string>() : a.dump());
    }
  }
  return cmd;
}

void DescribeParts(const json& j, std::string* o) {
  if (!Items(j, "instances").empty()) {
    Appendf(o, "\nInstances:\n");
    for (const json& i : Items(j, "instances")) {
      Appendf(o, "  node %d  %-28s %-15s %-9s last heartbeat %s\n", Field(i, "node", -1), Str(i, "id").c_str(),
              Str(i, "address").c_str(), Str(i, "state").c_str(), Clock(Field(i, "last_heartbeat", 0.0)).c_str());
    }
  }
  if (!Items(j, "nodes").empty()) {
    Appendf(o, "\nNodes (attempt %d):\n", Field(j, "attempt", 0));
    for (const json& n : Items(j, "nodes")) {
      std::string msg = Str(n, "message");
      if (msg.size() > 100) msg.replace(100, std::string::npos, "...");
      Appendf(o, "  node %d  %-11s exit %3d  %s\n", Field(n, "node", 0), Str(n, "state").c_str(), Field(n, "exit_code", -1),
              msg.c_str());
      if (Value(n, "sandbox")) Appendf(o, "          sandbox: %s\n", Str(n, "sandbox").c_str());
    }
  }
  if (!Items(j, "slowest_ranks").empty()) {
    Appendf(o, "\nSlowest ranks (mean step time):\n");
    for (const json& r : Items(j, "slowest_ranks")) {
      Appendf(o, "  rank %-4d %8.1f ms over %lld steps\n", Field(r, "rank", 0), 1e3 * Field(r, "mean_step_s", 0.0),
              static_cast<long long>(Field(r, "steps", int64_t{0})));
    }
  }
}

}  // namespace

std::string DescribeText(const json& j) {
  std::string o;
  Appendf(&o, "Job:            %s\n", Str(j, "id").c_str());
  Appendf(&o, "Status:         %s / %s\n", Str(j, "status").c_str(), Str(j, "secondary_status").c_str());
  Appendf(&o, "Attempt:        %d\n", Field(j, "attempt", 0));
  Appendf(&o, "Created:        %s\n", When(Field(j, "created_at", 0.0)).c_str());
  if (Field(j, "started_at", 0.0) > 0) Appendf(&o, "Started:        %s\n", When(Field(j, "started_at", 0.0)).c_str());
  if (Field(j, "ended_at", 0.0) > 0) {
    Appendf(&o, "Ended:          %s (exit code %d)\n", When(Field(j, "ended_at", 0.0)).c_str(), Field(j, "exit_code", -1));
  }
  if (!Str(j, "failure_reason").empty()) Appendf(&o, "Failure reason: %s\n", Str(j, "failure_reason").c_str());
  const json& spec = Member(j, "spec");
  Appendf(&o, "Command:        %s\n", CommandText(Member(spec, "entrypoint")).c_str());
  const json& res = Member(spec, "resources");
  Appendf(&o, "Resources:      %d x %s, %d rank(s) each\n", Field(res, "instance_count", 1), Str(res, "instance_type").c_str(),
          Field(res, "procs_per_instance", 1));
  Appendf(&o, "\nHistory:\n");
  for (const json& h : Items(j, "history")) {
    Appendf(&o, "  %s  %-19s %s\n", When(Field(h, "at", 0.0)).c_str(), Str(h, "secondary_status").c_str(), Str(h, "message").c_str());
  }
  DescribeParts(j, &o);
  return o;
}

std::string JobsText(const json& r, double now) {
  std::string o;
  Appendf(&o, "%-28s %-11s %-19s %9s %-8s %9s\n", "ID", "STATUS", "SECONDARY", "INSTANCES", "CREATED", "DURATION");
  for (const json& j : Items(r, "jobs")) {
    const double start = Field(j, "created_at", 0.0), end = Field(j, "ended_at", 0.0);
    Appendf(&o, "%-28s %-11s %-19s %9d %-8s %9s\n", Str(j, "id").c_str(), Str(j, "status").c_str(),
            Str(j, "secondary_status").c_str(), Field(j, "instance_count", 1), Clock(start).c_str(),
            Duration((end > 0 ? end : now) - start).c_str());
  }
  return o;
}

std::string LogLinesText(const json& page) {
  std::string o;
  for (const json& x : Items(page, "lines")) {
    o.append(LinePrefix(x));
    o.append(Str(x, "text"));
    o.push_back('\n');
  }
  return o;
}

std::string MetricsText(const json& points) {
  struct Agg {
    double last = 0, sum = 0, min = INFINITY, max = -INFINITY;
    int64_t n = 0;
  };
  std::map<std::pair<std::string, int>, Agg> agg;
  if (points.is_array()) {
    for (const json& p : points) {
      Agg& a = agg[{Str(p, "name"), Field(p, "rank", -1)}];
      const double v = Field(p, "value", 0.0);
      a.last = v;
      a.sum += v;
      a.min = std::min(a.min, v);
      a.max = std::max(a.max, v);
      ++a.n;
    }
  }
  std::string o;
  Appendf(&o, "%-26s %-6s %12s %12s %12s %12s %7s\n", "NAME", "RANK", "LAST", "MEAN", "MIN", "MAX", "COUNT");
  for (const auto& [key, a] : agg) {
    Appendf(&o, "%-26s %-6s %12.6g %12.6g %12.6g %12.6g %7lld\n", key.first.c_str(),
            key.second < 0 ? "node" : std::to_string(key.second).c_str(), a.last, a.sum / static_cast<double>(a.n), a.min,
            a.max, static_cast<long long>(a.n));
  }
  return o;
}

}  // namespace anneal::cli
