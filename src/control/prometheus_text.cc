#include "control/prometheus_text.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/utf8.h"

namespace anneal {

namespace {

std::string Number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char b[40];
  std::snprintf(b, sizeof(b), "%.15g", v);
  if (std::strtod(b, nullptr) != v) std::snprintf(b, sizeof(b), "%.17g", v);  // the shortest that reads back
  return b;
}

// A label value: UTF-8 (a scraper refuses the whole answer for one invalid byte, so invalid bytes
// become U+FFFD), with backslash, double quote and line feed escaped.
std::string Escaped(const std::string& s) {
  std::string o;
  for (char c : ReplaceInvalidUtf8(s)) {
    if (c == '\\') {
      o += "\\\\";
    } else if (c == '"') {
      o += "\\\"";
    } else if (c == '\n') {
      o += "\\n";
    } else {
      o += c;
    }
  }
  return o;
}

}  // namespace

std::string PromName(const std::string& s) {
  std::string o = s.empty() ? "_" : s;
  for (size_t i = 0; i < o.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(o[i]);
    const bool ok = std::isalpha(c) || c == '_' || c == ':' || (i > 0 && std::isdigit(c));
    if (!ok) o[i] = '_';
  }
  return o;
}

std::string PromLabelName(const std::string& s) {
  std::string o = PromName(s);
  for (char& c : o) c = c == ':' ? '_' : c;
  return o;
}

void PromText::Family(const std::string& name, const char* type, const std::string& help) {
  std::string h;  // one line; a backslash escaped, as HELP's format wants
  for (char c : ReplaceInvalidUtf8(help)) h += c == '\n' ? " " : c == '\\' ? "\\\\" : std::string(1, c);
  out_ += "# HELP " + name + " " + h + "\n# TYPE " + name + " " + type + "\n";
}

void PromText::Sample(const std::string& name, const PromLabels& labels, double value) {
  out_ += name;
  if (!labels.empty()) {
    out_ += "{";
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i) out_ += ',';
      out_ += PromLabelName(labels[i].first);
      out_ += "=\"";
      out_ += Escaped(labels[i].second);
      out_ += '"';
    }
    out_ += "}";
  }
  out_ += ' ';
  out_ += Number(value);
  out_ += '\n';
}

PromHistogram::PromHistogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void PromHistogram::Observe(double v) {
  std::lock_guard<std::mutex> l(mu_);
  size_t b = 0;
  while (b < bounds_.size() && v > bounds_[b]) ++b;
  ++counts_[b];
  sum_ += v;
  ++count_;
}

void PromHistogram::Write(PromText* t, const std::string& name, const PromLabels& labels) const {
  std::lock_guard<std::mutex> l(mu_);
  int64_t cumulative = 0;
  for (size_t b = 0; b <= bounds_.size(); ++b) {
    cumulative += counts_[b];
    PromLabels with = labels;
    with.push_back({"le", b < bounds_.size() ? Number(bounds_[b]) : "+Inf"});
    t->Sample(name + "_bucket", with, static_cast<double>(cumulative));
  }
  t->Sample(name + "_sum", labels, sum_);
  t->Sample(name + "_count", labels, static_cast<double>(count_));
}

std::vector<double> PromHistogram::LatencyBounds() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

}  // namespace anneal
