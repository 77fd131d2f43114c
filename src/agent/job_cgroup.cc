#include "agent/job_cgroup.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <algorithm>
#include <filesystem>
#include <thread>

#include "core/clock.h"

namespace anneal {

namespace {

Status WriteValue(const std::string& file, const std::string& v) {
  std::ofstream f(file);
  f << v << std::flush;
  if (!f) return IoError("cgroup: cannot write '" + v + "' to " + file + ": " + std::strerror(errno));
  return Status::Ok();
}

std::string ReadText(const std::string& file) {
  std::ifstream f(file);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

Status MakeGroup(const std::string& dir) {
  const std::string parent = dir.substr(0, dir.rfind('/'));
  if (::mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST) return IoError("cgroup: mkdir " + parent + ": " + std::strerror(errno));
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return IoError("cgroup: mkdir " + dir + ": " + std::strerror(errno));
  return Status::Ok();
}

// The v1 mount of a controller ("memory", "cpu"): /sys/fs/cgroup/<name> or a joined one (cpu,cpuacct).
std::string V1Root(const std::string& controller) {
  std::ifstream m("/proc/self/mounts");
  std::string dev, dir, type, opts, rest;
  while (m >> dev >> dir >> type >> opts && std::getline(m, rest)) {
    if (type != "cgroup") continue;
    std::stringstream o(opts);
    for (std::string t; std::getline(o, t, ',');) {
      if (t == controller) return dir;
    }
  }
  return "";
}

// The unified hierarchy's root when it holds the memory controller.
std::string V2Root() {
  for (const char* r : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
    const std::string c = ReadText(std::string(r) + "/cgroup.controllers");
    if (c.find("memory") != std::string::npos) return r;
  }
  return "";
}

}  // namespace

Result<std::unique_ptr<JobCgroup>> JobCgroup::Create(const std::string& name, int64_t memory_bytes, double cpus) {
  if (::geteuid() != 0) return IoError("cgroup: only root creates a job's cgroups (the agent runs as uid " + std::to_string(::geteuid()) + ")");
  std::unique_ptr<JobCgroup> g(new JobCgroup());
  const long period = 100000;
  const long quota = cpus > 0 ? std::max(1000L, static_cast<long>(cpus * period)) : -1;
  if (const std::string v2 = V2Root(); !v2.empty()) {
    g->v2_ = true;
    (void)WriteValue(v2 + "/cgroup.subtree_control", "+memory +cpu");
    const std::string dir = v2 + "/anneal/" + name;
    ANNEAL_RETURN_IF_ERROR(MakeGroup(dir));
    (void)WriteValue(v2 + "/anneal/cgroup.subtree_control", "+memory +cpu");
    g->dirs_.push_back(dir);
    g->memory_dir_ = dir;
    g->memory_limited_ = memory_bytes > 0;
    if (memory_bytes > 0) ANNEAL_RETURN_IF_ERROR(WriteValue(dir + "/memory.max", std::to_string(memory_bytes)));
    if (memory_bytes > 0) (void)WriteValue(dir + "/memory.swap.max", "0");
    if (quota > 0) ANNEAL_RETURN_IF_ERROR(WriteValue(dir + "/cpu.max", std::to_string(quota) + " " + std::to_string(period)));
    return g;
  }
  const std::string mem = V1Root("memory"), cpu = V1Root("cpu");
  if (mem.empty()) return IoError("cgroup: neither a unified hierarchy with the memory controller nor a v1 memory hierarchy is mounted");
  const std::string md = mem + "/anneal/" + name;
  ANNEAL_RETURN_IF_ERROR(MakeGroup(md));
  g->dirs_.push_back(md);
  g->memory_dir_ = md;
  g->memory_limited_ = memory_bytes > 0;
  if (memory_bytes > 0) {
    ANNEAL_RETURN_IF_ERROR(WriteValue(md + "/memory.limit_in_bytes", std::to_string(memory_bytes)));
    // No swapping around the limit where swap is accounted (memsw), and none encouraged where not.
    if (::access((md + "/memory.memsw.limit_in_bytes").c_str(), F_OK) == 0) {
      (void)WriteValue(md + "/memory.memsw.limit_in_bytes", std::to_string(memory_bytes));
    }
    (void)WriteValue(md + "/memory.swappiness", "0");
  }
  if (!cpu.empty()) {
    const std::string cd = cpu + "/anneal/" + name;
    ANNEAL_RETURN_IF_ERROR(MakeGroup(cd));
    g->dirs_.push_back(cd);
    if (quota > 0) {
      ANNEAL_RETURN_IF_ERROR(WriteValue(cd + "/cpu.cfs_period_us", std::to_string(period)));
      ANNEAL_RETURN_IF_ERROR(WriteValue(cd + "/cpu.cfs_quota_us", std::to_string(quota)));
    }
  } else if (quota > 0) {
    return IoError("cgroup: resources.cpus needs the cpu controller, which is not mounted here");
  }
  return g;
}

long long JobCgroup::OomKills() const {
  std::stringstream ev(ReadText(memory_dir_ + (v2_ ? "/memory.events" : "/memory.oom_control")));
  std::string key;
  long long v = 0, kills = -1;
  while (ev >> key >> v) {
    if (key == "oom_kill") kills = v;
  }
  if (v2_ || !memory_limited_ || !count_limit_reached_ || kills < 0) return kills;
  // The limit reached: the peak usage (memory, or memory and swap where that is accounted) at it.
  // (This kernel's memsw counter keeps no failcnt, and memsw is what fails first when both are set.)
  auto number = [&](const char* f) {
    std::stringstream t(ReadText(memory_dir_ + f));
    long long v = -1;
    return t >> v ? v : -1;
  };
  const long long limit = number("/memory.limit_in_bytes");
  const long long peak = std::max(number("/memory.max_usage_in_bytes"), number("/memory.memsw.max_usage_in_bytes"));
  return kills + (limit > 0 && peak >= limit ? 1 : 0);
}

namespace {

// A group's folder and the groups below it (a container's, which podman makes under the job's), deepest first.
std::vector<std::string> GroupTree(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec); !ec && it != std::filesystem::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_directory(ec) && !it->is_symlink(ec)) out.push_back(it->path().string());
  }
  std::sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  out.push_back(dir);
  return out;
}

}  // namespace

std::vector<int> JobCgroup::Pids() const {
  std::set<int> pids;
  for (const std::string& top : dirs_) {
    for (const std::string& d : GroupTree(top)) {
      std::stringstream s(ReadText(d + "/cgroup.procs"));
      for (int p; s >> p;) pids.insert(p);
    }
  }
  return {pids.begin(), pids.end()};
}

int JobCgroup::KillAll() {
  int killed = 0;
  if (v2_) (void)WriteValue(memory_dir_ + "/cgroup.kill", "1");
  // A process may fork between the read and the kill: read again until the group is empty.
  for (int round = 0; round < 500; ++round) {
    const std::vector<int> pids = Pids();
    if (pids.empty()) break;
    for (int p : pids) {
      if (::kill(p, SIGKILL) == 0) ++killed;
    }
    Clock::Real().SleepFor(round < 10 ? 0.002 : 0.02);
  }
  return killed;
}

JobCgroup::~JobCgroup() {
  KillAll();
  for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) {
    for (const std::string& d : GroupTree(*it)) {  // a container's group first, then the job's
      for (int i = 0; i < 100 && ::rmdir(d.c_str()) != 0 && errno == EBUSY; ++i) {
        Clock::Real().SleepFor(0.01);
      }
    }
  }
}

}  // namespace anneal
