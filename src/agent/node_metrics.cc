#include "agent/node_metrics.h"

#include <sys/statvfs.h>
#include <unistd.h>

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

std::vector<std::pair<int, double>> ProgressReader::Poll() {
  std::vector<std::pair<int, double>> out;
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
    out.push_back({rank, value});
  }
  return out;
}

}  // namespace anneal
