// The Prometheus text writer (control/prometheus_text.h) on hostile label values and help texts:
// metric names, job ids and node names reach /metrics from jobs and agents. The input, split at NUL
// bytes: a help text, then label name / value pairs; its first 8 bytes are also the sample's value.
// Property: the output is the exposition format a scraper reads — every line a # HELP, # TYPE or a
// sample whose label names match [a-zA-Z_][a-zA-Z0-9_]*, whose values are valid UTF-8 and unescape
// to the value given (invalid bytes as U+FFFD), and whose number reads back.
#include <cmath>
#include <cstring>
#include <sstream>

#include "control/prometheus_text.h"
#include "core/utf8.h"
#include "fuzz/fuzz_target.h"

namespace {

// A metric name may hold ':', a label name not.
bool NameOk(const std::string& n, bool metric) {
  if (n.empty()) return false;
  for (size_t i = 0; i < n.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(n[i]);
    if (!(std::isalpha(c) || c == '_' || (metric && c == ':') || (i > 0 && std::isdigit(c)))) return false;
  }
  return true;
}

// Reads one sample line: name{k="v",...} number. Returns false when it is not one.
bool ReadSample(const std::string& line, anneal::PromLabels* labels, double* value) {
  size_t i = line.find_first_of("{ ");
  if (i == std::string::npos || !NameOk(line.substr(0, i), true)) return false;
  if (line[i] == '{') {
    ++i;
    while (line[i] != '}') {
      const size_t eq = line.find('=', i);
      if (eq == std::string::npos || !NameOk(line.substr(i, eq - i), false) || line[eq + 1] != '"') return false;
      std::string v;
      size_t j = eq + 2;
      for (; j < line.size() && line[j] != '"'; ++j) {
        if (line[j] != '\\') {
          v += line[j];
          continue;
        }
        const char e = line[++j];
        if (e == 'n') v += '\n';
        else if (e == '\\' || e == '"') v += e;
        else return false;
      }
      if (j >= line.size()) return false;
      labels->push_back({line.substr(i, eq - i), v});
      i = j + 1;
      if (line[i] == ',') ++i;
      else if (line[i] != '}') return false;
    }
    ++i;
  }
  if (line[i] != ' ') return false;
  const std::string num = line.substr(i + 1);
  if (num == "NaN" || num == "+Inf" || num == "-Inf") {
    *value = num == "NaN" ? NAN : num == "+Inf" ? INFINITY : -INFINITY;
    return true;
  }
  char* end = nullptr;
  *value = std::strtod(num.c_str(), &end);
  return !num.empty() && *end == '\0';
}

}  // namespace

ANNEAL_FUZZ_TARGET(prometheus) {
  const std::string text = anneal::fuzz::Text(data, size);
  std::vector<std::string> parts;
  for (size_t p = 0, q; p <= text.size(); p = q + 1) {
    q = text.find('\0', p);
    if (q == std::string::npos) q = text.size();
    parts.push_back(text.substr(p, q - p));
  }
  double value = 0;
  if (size >= 8) std::memcpy(&value, data, 8);
  anneal::PromLabels labels;
  for (size_t i = 1; i + 1 < parts.size() && labels.size() < 8; i += 2) labels.push_back({parts[i], parts[i + 1]});
  anneal::PromText t;
  t.Family("anneal_fuzz", "gauge", parts[0]);
  t.Sample("anneal_fuzz", labels, value);
  std::istringstream in(t.text());
  std::string line;
  int samples = 0;
  while (std::getline(in, line)) {
    FUZZ_EXPECT(anneal::FindInvalidUtf8(line) == std::string::npos);
    if (line.rfind("# HELP anneal_fuzz ", 0) == 0 || line == "# TYPE anneal_fuzz gauge") continue;
    anneal::PromLabels read;
    double v = 0;
    FUZZ_EXPECT(ReadSample(line, &read, &v));
    FUZZ_EXPECT(read.size() == labels.size());
    for (size_t i = 0; i < read.size(); ++i) {
      FUZZ_EXPECT(read[i].first == anneal::PromLabelName(labels[i].first));
      FUZZ_EXPECT(read[i].second == anneal::ReplaceInvalidUtf8(labels[i].second));
    }
    FUZZ_EXPECT((std::isnan(v) && std::isnan(value)) || v == value);
    ++samples;
  }
  FUZZ_EXPECT(samples == 1);
  return 0;
}
