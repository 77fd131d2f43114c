#include "agent/node_metrics.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/env.h"

namespace anneal {

std::vector<std::pair<std::string, double>> SystemSampler::Sample() {
  std::vector<std::pair<std::string, double>> out;
  if (std::ifstream stat("/proc/stat"); stat) {
    std::string cpu;
    unsigned long long v[10] = {};
    stat >> cpu;
    for (auto& x : v) stat >> x;
    const unsigned long long idle = v[3] + v[4];
    unsigned long long total = 0;
    for (int i = 0; i < 8; ++i) total += v[i];
    const unsigned long long busy = total - idle;
    if (last_total_ > 0 && total > last_total_) {
      out.push_back({"cpu_percent", 100.0 * static_cast<double>(busy - last_busy_) / static_cast<double>(total - last_total_)});
    }
    last_busy_ = busy;
    last_total_ = total;
  }
  if (std::ifstream mem("/proc/meminfo"); mem) {
    std::string key;
    double value = 0, total = -1, avail = -1;
    std::string unit;
    while (mem >> key >> value >> unit) {
      if (key == "MemTotal:") total = value;
      if (key == "MemAvailable:") avail = value;
    }
    if (total >= 0 && avail >= 0) out.push_back({"memory_used_mb", (total - avail) / 1024.0});
  }
  struct statvfs fs {};
  if (::statvfs(disk_path_.c_str(), &fs) == 0 && fs.f_blocks > 0) {
    out.push_back({"disk_used_percent", 100.0 * static_cast<double>(fs.f_blocks - fs.f_bavail) / static_cast<double>(fs.f_blocks)});
  }
  if (::access("/dev/nvidia0", F_OK) == 0) {
    if (FILE* p = ::popen("nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits 2>/dev/null", "r")) {
      double util = 0, mem = 0;
      int n = 0;
      char line[256];
      while (std::fgets(line, sizeof(line), p)) {
        double u = 0, m = 0;
        if (std::sscanf(line, "%lf, %lf", &u, &m) == 2) util += u, mem += m, ++n;
      }
      ::pclose(p);
      if (n > 0) {
        out.push_back({"gpu_utilization_percent", util / n});
        out.push_back({"gpu_memory_used_mb", mem / n});
      }
    }
  }
  return out;
}

MetricExtractor::MetricExtractor(const std::vector<MetricDefinition>& defs) {
  for (const auto& d : defs) defs_.push_back({d.name, std::regex(d.regex)});
}

std::vector<std::pair<std::string, double>> MetricExtractor::Match(const std::string& line) const {
  std::vector<std::pair<std::string, double>> out;
  for (const auto& [name, re] : defs_) {
    std::smatch m;
    if (!std::regex_search(line, m, re) || m.size() < 2) continue;
    const std::string s = m[1].str();
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (end != s.c_str()) out.push_back({name, v});
  }
  return out;
}

std::vector<RankStepTime> ProgressReader::Poll() {
  std::vector<RankStepTime> out;
  auto names = Env::Default().ListDir(dir_);
  if (!names.ok()) return out;
  for (const std::string& n : *names) {
    if (n.rfind("rank-", 0) != 0) continue;
    const int rank = std::atoi(n.c_str() + 5);
    std::ifstream f(JoinPath(dir_, n));
    long long step = -1;
    double secs = 0, total = -1;
    if (!(f >> step >> secs)) continue;
    if (!(f >> total)) total = -1;
    auto it = last_.find(rank);
    if (it != last_.end() && it->second.first >= step) continue;
    // The mean over the steps since the last poll when the file carries the running total.
    double value = secs;
    if (it != last_.end() && total >= 0 && it->second.second >= 0) {
      value = (total - it->second.second) / static_cast<double>(step - it->second.first);
    }
    last_[rank] = {step, total};
    out.push_back({rank, step, value});
  }
  return out;
}

bool ParseTrainerMetricsLine(std::string_view line, int64_t* step, std::vector<std::pair<std::string, double>>* out) {
  size_t i = 0;
  int64_t s = 0;
  while (i < line.size() && line[i] >= '0' && line[i] <= '9') {
    if (s > (INT64_MAX - 9) / 10) return false;
    s = s * 10 + (line[i++] - '0');
  }
  if (i == 0 || (i < line.size() && line[i] != ' ')) return false;
  *step = s;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    size_t end = line.find(' ', i);
    if (end == std::string_view::npos) end = line.size();
    const std::string_view tok = line.substr(i, end - i);
    i = end;
    const size_t eq = tok.find('=');
    if (eq == 0 || eq == std::string_view::npos || eq + 1 == tok.size()) continue;
    const std::string_view name = tok.substr(0, eq);
    bool ok = true;
    for (char c : name) ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_');
    if (!ok) continue;
    const std::string v(tok.substr(eq + 1));
    char* vend = nullptr;
    const double x = std::strtod(v.c_str(), &vend);
    if (vend != v.c_str() + v.size()) continue;
    out->push_back({std::string(name), x});
  }
  return true;
}

std::vector<StepPoint> TrainerMetricsReader::Poll() {
  constexpr uint64_t kMaxRead = 4 << 20;
  constexpr size_t kMaxLine = 64 << 10;
  std::vector<StepPoint> out;
  auto names = Env::Default().ListDir(dir_);
  if (!names.ok()) return out;
  for (const std::string& n : *names) {
    if (n.rfind("metrics-", 0) != 0) continue;
    char* end = nullptr;
    const long rank = std::strtol(n.c_str() + 8, &end, 10);
    if (end == n.c_str() + 8 || *end != '\0' || rank < 0) continue;
    std::ifstream f(JoinPath(dir_, n), std::ios::binary);
    if (!f) continue;
    File& st = files_[static_cast<int>(rank)];
    f.seekg(0, std::ios::end);
    const uint64_t size = static_cast<uint64_t>(f.tellg());
    if (size < st.offset) st = File{};  // replaced by a shorter file: read it again
    if (size == st.offset) continue;
    const uint64_t want = std::min<uint64_t>(size - st.offset, kMaxRead);
    std::string buf(want, '\0');
    f.seekg(static_cast<std::streamoff>(st.offset));
    f.read(buf.data(), static_cast<std::streamsize>(want));
    buf.resize(static_cast<size_t>(f.gcount()));
    st.offset += buf.size();
    size_t from = 0;
    for (size_t nl; (nl = buf.find('\n', from)) != std::string::npos; from = nl + 1) {
      if (st.overlong) {  // the end of a line that was too long: dropped with it
        st.overlong = false;
        st.partial.clear();
        continue;
      }
      std::string line = st.partial + buf.substr(from, nl - from);
      st.partial.clear();
      int64_t step = 0;
      std::vector<std::pair<std::string, double>> values;
      if (!ParseTrainerMetricsLine(line, &step, &values)) continue;
      for (auto& [name, v] : values) {
        if (!skip_.count(name)) out.push_back({static_cast<int>(rank), step, std::move(name), v});
      }
    }
    if (!st.overlong) st.partial += buf.substr(from);
    if (st.partial.size() > kMaxLine) {
      st.partial.clear();
      st.overlong = true;
    }
  }
  return out;
}

}  // namespace anneal
