#include "control/job_summary.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <string_view>

namespace anneal {

namespace {

void AppendString(std::string& out, const std::string& s) {
  bool plain = true;  // nothing to escape and nothing to check as UTF-8
  for (unsigned char c : s) plain = plain && c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
  if (plain) {
    out += '"';
    out += s;
    out += '"';
  } else {
    out += nlohmann::json(s).dump();  // escapes; refuses invalid UTF-8 as every answer does
  }
}

void AppendNumber(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";  // as nlohmann writes NaN and infinities
    return;
  }
  char buf[32];
  // Fixed notation within nlohmann's range for it (times: ~1.8e9), its exponent form outside.
  const double a = v < 0 ? -v : v;
  const bool fixed = a == 0 || (a >= 1e-4 && a < 1e15);
  const auto r = fixed ? std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::fixed)
                       : std::to_chars(buf, buf + sizeof(buf), v);
  const std::string_view t(buf, r.ptr - buf);
  out += t;
  if (t.find_first_of(".eEn") == std::string_view::npos) out += ".0";  // a double, as nlohmann writes it
}

}  // namespace

std::string JobSummaryJson(const JobRecord& j, const std::string* pending_reason) {
  // The keys in nlohmann's (sorted) order, so the text is what it wrote before.
  std::string o = "{\"attempt\":" + std::to_string(j.attempt) + ",\"created_at\":";
  AppendNumber(o, j.created_at);
  o += ",\"ended_at\":";
  AppendNumber(o, j.ended_at);
  o += ",\"exit_code\":" + std::to_string(j.exit_code) + ",\"failure_reason\":";
  AppendString(o, j.failure_reason);
  o += ",\"id\":";
  AppendString(o, j.id);
  o += ",\"instance_count\":" + std::to_string(j.spec.instance_count) + ",\"name\":";
  AppendString(o, j.name);
  o += ",\"owner\":";
  AppendString(o, j.owner);
  if (pending_reason) {
    o += ",\"pending_reason\":";
    AppendString(o, *pending_reason);
  }
  o += ",\"secondary_status\":\"" + std::string(PhaseName(j.phase)) + "\",\"started_at\":";
  AppendNumber(o, j.started_at);
  o += ",\"status\":\"" + std::string(PrimaryStatus(j.phase)) + "\"";
  if (j.warm_pool.is_object() && !j.warm_pool.empty()) o += ",\"warm_pool\":" + j.warm_pool.dump();
  return o + "}";
}

}  // namespace anneal
