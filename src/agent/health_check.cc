#include "agent/health_check.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/env.h"
#include "core/progress.h"

extern char** environ;

namespace anneal {

namespace {

using nlohmann::json;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr size_t kDiskProbeBytes = 4u << 20;
constexpr size_t kOutputKeep = 64u << 10;  // bytes of a command's output kept (the end)
constexpr int kOutputLines = 10;           // lines of it in a detail

std::string Fmt(double v, int decimals = 1) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

json Check(const char* name, bool ok, const std::string& detail) {
  return {{"name", name}, {"ok", ok}, {"detail", detail}};
}

json Skipped(const char* name, const std::string& why) {
  json c = Check(name, true, "skipped: " + why);
  c["skipped"] = why;
  return c;
}

// A shell command's end: its wait status, what it printed (stdout and stderr, the last 64 KiB).
struct ShellRun {
  std::string error;  // it could not be started (pipe, fork)
  int status = 0;
  bool timed_out = false, abandoned = false;
  std::string output;
};

// This process's environment with env over it, as execve's "K=V" entries.
std::vector<std::string> MergedEnvironment(const std::map<std::string, std::string>& env) {
  std::map<std::string, std::string> merged;
  for (char** e = environ; e && *e; ++e) {
    const std::string s(*e);
    const size_t eq = s.find('=');
    if (eq != std::string::npos) merged[s.substr(0, eq)] = s.substr(eq + 1);
  }
  for (const auto& [k, v] : env) merged[k] = v;
  std::vector<std::string> entries;
  for (const auto& [k, v] : merged) entries.push_back(k + "=" + v);
  return entries;
}

// The child's side of the fork: its own process group, the default signal dispositions (the agent
// ignores SIGPIPE and its thread may block signals), stdin from /dev/null, stdout and stderr into
// the pipe. Only async-signal-safe calls: the agent has threads.
[[noreturn]] void ExecShell(char* const argv[], char* const envp[], int out_fd) {
  ::setpgid(0, 0);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigaction(SIGPIPE, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  const int null = ::open("/dev/null", O_RDONLY);
  if (null >= 0) ::dup2(null, 0);
  ::dup2(out_fd, 1);
  ::dup2(out_fd, 2);
  ::execve(argv[0], argv, envp);
  ::_exit(127);
}

// Reads the command's output (the last kOutputKeep bytes kept) until it exits, or kills its group at
// the deadline or on *stop.
void AwaitShell(pid_t pid, int fd, double timeout_s, const std::atomic<bool>* stop, ShellRun* r) {
  bool eof = false;
  auto drain = [&] {  // what is in the pipe now (bounded: a writer that never pauses cannot hold us)
    char buf[4096];
    for (int i = 0; i < 1024 && !eof; ++i) {
      const ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      eof = n == 0;
      if (n <= 0) return;  // EOF, or nothing more for now
      r->output.append(buf, static_cast<size_t>(n));
      if (r->output.size() > 2 * kOutputKeep) r->output.erase(0, r->output.size() - kOutputKeep);
    }
  };
  const double deadline = MonotonicSeconds() + timeout_s;
  for (;;) {
    if (eof) {  // the command closed its output but runs on: poll would return at once
      Clock::Real().SleepFor(0.05);
    } else {
      pollfd p{fd, POLLIN, 0};
      ::poll(&p, 1, 100);
      drain();
    }
    int st = 0;
    if (::waitpid(pid, &st, WNOHANG) == pid) {
      drain();  // what it wrote last; a background child still holding the pipe is not waited for
      r->status = st;
      return;
    }
    const bool stopped = stop && stop->load();
    if (stopped || MonotonicSeconds() > deadline) {
      (stopped ? r->abandoned : r->timed_out) = true;
      ::kill(-pid, SIGKILL);
      while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
      }
      drain();
      r->status = st;
      return;
    }
  }
}

// Runs `/bin/sh -c command` with env added to this process's environment, in its own process group
// (killed whole at the timeout or on *stop).
ShellRun RunShell(const std::string& command, const std::map<std::string, std::string>& env, double timeout_s,
                  const std::atomic<bool>* stop) {
  ShellRun r;
  std::vector<std::string> entries = MergedEnvironment(env);
  std::vector<char*> envp;
  for (std::string& s : entries) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string sh = "/bin/sh", dash_c = "-c", cmd = command;
  char* argv[] = {sh.data(), dash_c.data(), cmd.data(), nullptr};
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    r.error = std::string("pipe: ") + std::strerror(errno);
    return r;
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    r.error = std::string("fork: ") + std::strerror(errno);
    ::close(fds[0]);
    ::close(fds[1]);
    return r;
  }
  if (pid == 0) ExecShell(argv, envp.data(), fds[1]);
  ::setpgid(pid, pid);  // also here: the group exists before any kill below, whichever runs first
  ::close(fds[1]);
  ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
  AwaitShell(pid, fds[0], timeout_s, stop, &r);
  ::close(fds[0]);
  if (r.output.size() > kOutputKeep) r.output.erase(0, r.output.size() - kOutputKeep);
  return r;
}

std::string DescribeStatus(int st) {
  if (WIFEXITED(st)) return "exit code " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) return std::string("killed by signal ") + std::to_string(WTERMSIG(st)) + " (" + strsignal(WTERMSIG(st)) + ")";
  return "wait status " + std::to_string(st);
}

// The last n non-empty lines of text, joined by " | ".
std::string LastLines(const std::string& text, int n) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    if (line.size() > 300) line = line.substr(0, 300) + "...";
    lines.push_back(line);
  }
  std::string out;
  for (size_t i = lines.size() > static_cast<size_t>(n) ? lines.size() - n : 0; i < lines.size(); ++i) {
    if (!out.empty()) out += " | ";
    out += lines[i];
  }
  return out;
}

// One thread's multiply-adds on an array that stays in L1, for about `seconds`: GFLOP/s (2 per FMA).
double FmaProbe(double seconds) {
  constexpr int kN = 512, kReps = 200;
  alignas(64) float x[kN];
  for (int i = 0; i < kN; ++i) x[i] = 1.0f + static_cast<float>(i) * 1e-6f;
  const float m = 0.9999f, c = 1e-4f;  // x -> 1: no overflow, no denormals
  long long flops = 0;
  const double t0 = MonotonicSeconds();
  double elapsed = 0;
  do {
    for (int rep = 0; rep < kReps; ++rep) {
      for (int i = 0; i < kN; ++i) x[i] = x[i] * m + c;
    }
    flops += 2LL * kN * kReps;
    elapsed = MonotonicSeconds() - t0;
  } while (elapsed < seconds);
  float sum = 0;
  for (float v : x) sum += v;
  volatile float sink = sum;  // keeps the loop
  (void)sink;
  return elapsed > 0 ? static_cast<double>(flops) / elapsed / 1e9 : 0;
}

std::optional<double> ReadNumber(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  if (!(f >> s) || s == "max") return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str()) return std::nullopt;
  return v;
}

double ReadStatKey(const std::string& path, const std::string& key) {
  std::ifstream f(path);
  std::string k;
  double v = 0;
  while (f >> k >> v) {
    if (k == key) return v;
  }
  return 0;
}

// What the memory cgroups of this process (its own and every ancestor up to the mount) still allow:
// the lowest limit - working set (usage - inactive file pages), with where it was found; nullopt when
// no cgroup limits memory.
std::optional<double> CgroupMemoryRoom(std::string* where) {
  std::ifstream cg("/proc/self/cgroup");
  std::string line, v1, v2;
  bool have_v1 = false, have_v2 = false;
  while (std::getline(cg, line)) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (line.rfind("0::", 0) == 0) {
      v2 = path;
      have_v2 = true;
    }
    std::istringstream cs(controllers);
    for (std::string c; std::getline(cs, c, ',');) {
      if (c == "memory") {
        v1 = path;
        have_v1 = true;
      }
    }
  }
  struct Hierarchy {
    std::string root, path, limit, usage, inactive;
  };
  std::vector<Hierarchy> hs;
  if (have_v1) hs.push_back({"/sys/fs/cgroup/memory", v1, "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"});
  if (have_v2) {
    for (const char* root : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
      hs.push_back({root, v2, "memory.max", "memory.current", "inactive_file"});
    }
  }
  std::optional<double> best;
  for (const Hierarchy& h : hs) {
    if (::access(h.root.c_str(), F_OK) != 0) continue;
    // Without a cgroup namespace the path may name a folder this mount does not show: the mount's
    // root is then this container's own cgroup.
    std::string dir = h.root + (h.path == "/" ? "" : h.path);
    if (::access(dir.c_str(), F_OK) != 0) dir = h.root;
    for (;;) {
      const auto limit = ReadNumber(dir + "/" + h.limit);
      const auto usage = ReadNumber(dir + "/" + h.usage);
      if (limit && usage && *limit < 1e18) {  // v1 writes "no limit" as ~2^63
        const double working = std::max(0.0, *usage - ReadStatKey(dir + "/memory.stat", h.inactive));
        const double room = std::max(0.0, *limit - working);
        if (!best || room < *best) {
          best = room;
          *where = dir;
        }
      }
      if (dir.size() <= h.root.size()) break;
      dir = dir.substr(0, dir.rfind('/'));
    }
  }
  return best;
}

std::string FindOnPath(const std::string& name) {
  const char* p = std::getenv("PATH");
  std::istringstream dirs(p ? p : "/usr/bin:/bin");
  for (std::string d; std::getline(dirs, d, ':');) {
    if (d.empty()) continue;
    const std::string f = JoinPath(d, name);
    if (::access(f.c_str(), X_OK) == 0) return f;
  }
  return "";
}

}  // namespace

json CheckCpu(const HealthCheckOptions& o) {
  cpu_set_t set;
  CPU_ZERO(&set);
  int cpus = 0;
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) {
    cpus = CPU_COUNT(&set);
  } else {
    cpus = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  }
  const double gflops = FmaProbe(o.cpu_probe_s);
  const bool ok = cpus >= o.slots;
  std::string detail = std::to_string(cpus) + " CPU(s) available to the agent for " + std::to_string(o.slots) +
                       " slot(s); one thread does " + Fmt(gflops) + " GFLOP/s of FMAs";
  if (!ok) detail += ": fewer CPUs than slots (check the agent's CPU affinity / cpuset, or lower --slots)";
  json c = Check("cpu", ok, detail);
  c["cpus"] = cpus;
  c["slots"] = o.slots;
  c["gflops"] = gflops;
  return c;
}

json CheckMemory(const HealthCheckOptions& o) {
  double avail_kb = -1;
  {
    std::ifstream mem("/proc/meminfo");
    std::string key, unit;
    double value = 0;
    while (mem >> key >> value >> unit) {
      if (key == "MemAvailable:") avail_kb = value;
    }
  }
  if (avail_kb < 0) return Check("memory", false, "could not read MemAvailable from /proc/meminfo");
  const double meminfo_gb = avail_kb * 1024.0 / kGiB;
  double avail_gb = meminfo_gb;
  std::string source = "MemAvailable";
  std::string cg_dir;
  const auto room = CgroupMemoryRoom(&cg_dir);
  if (room && *room / kGiB < avail_gb) {
    avail_gb = *room / kGiB;
    source = "the cgroup limit at " + cg_dir;
  }
  const bool ok = avail_gb >= o.min_free_memory_gb;
  std::string detail = Fmt(avail_gb) + " GiB available (" + source + ")";
  detail += ok ? ", at least " : ", below ";
  detail += "min_free_memory_gb " + Fmt(o.min_free_memory_gb);
  if (!ok) detail += ": another process holds the memory, or the instance is too small for the job";
  json c = Check("memory", ok, detail);
  c["available_gb"] = avail_gb;
  c["meminfo_available_gb"] = meminfo_gb;
  if (room) c["cgroup_available_gb"] = *room / kGiB;
  c["min_gb"] = o.min_free_memory_gb;
  return c;
}

json CheckDisk(const HealthCheckOptions& o) {
  struct statvfs fs {};
  if (::statvfs(o.work_dir.c_str(), &fs) != 0) {
    return Check("disk", false, "statvfs " + o.work_dir + ": " + std::strerror(errno));
  }
  const double free_gb = static_cast<double>(fs.f_bavail) * static_cast<double>(fs.f_frsize) / kGiB;
  const bool space_ok = free_gb >= o.min_free_disk_gb;
  std::string detail = Fmt(free_gb) + " GiB free in " + o.work_dir;
  detail += space_ok ? ", at least " : ", below ";
  detail += "min_free_disk_gb " + Fmt(o.min_free_disk_gb);

  // A small file written, synced, read back and removed: a read-only, failing or full disk shows here.
  Env& env = Env::Default();
  std::string data(kDiskProbeBytes, '\0');
  uint32_t x = static_cast<uint32_t>(::getpid()) * 2654435761u + 1;
  for (char& ch : data) {
    x = x * 1664525u + 1013904223u;
    ch = static_cast<char>(x >> 24);
  }
  const std::string path = JoinPath(o.work_dir, ".anneal-healthcheck-" + std::to_string(::getpid()));
  double write_mbps = 0;
  Status io = [&]() -> Status {
    const double t0 = MonotonicSeconds();
    ANNEAL_ASSIGN_OR_RETURN(auto f, env.OpenForWrite(path));
    ANNEAL_RETURN_IF_ERROR(f->Append(data));
    ANNEAL_RETURN_IF_ERROR(f->Close());  // flushes and fsyncs
    const double dt = MonotonicSeconds() - t0;
    write_mbps = dt > 0 ? static_cast<double>(kDiskProbeBytes) / (1 << 20) / dt : 0;
    ANNEAL_ASSIGN_OR_RETURN(std::string back, env.ReadFile(path));
    if (back != data) {
      return IoError("the 4 MiB test file " + path + " read back different from what was written (" +
                     std::to_string(back.size()) + " bytes)");
    }
    return env.Remove(path);
  }();
  if (!io.ok()) {
    (void)env.Remove(path);
    detail += "; writing and reading back a 4 MiB file failed: " + io.message();
  } else {
    detail += "; 4 MiB written with fsync at " + Fmt(write_mbps) + " MB/s and read back intact";
  }
  const bool ok = space_ok && io.ok();
  if (!space_ok) detail += ": free space in the work dir (old jobs' folders?) or use a larger disk";
  json c = Check("disk", ok, detail);
  c["path"] = o.work_dir;
  c["free_gb"] = free_gb;
  c["min_gb"] = o.min_free_disk_gb;
  c["write_mbps"] = write_mbps;
  return c;
}

json CheckGpu(const HealthCheckOptions& o) {
  if (FindOnPath("nvidia-smi").empty()) return Skipped("gpu", "no GPU on this instance (nvidia-smi is not on the PATH)");
  const ShellRun r = RunShell("nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv,noheader", {},
                              30, o.stop);
  if (!r.error.empty()) return Check("gpu", false, "could not run nvidia-smi: " + r.error);
  if (r.timed_out || r.abandoned || !WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0) {
    std::string how = r.timed_out ? std::string("timed out after 30 s") : r.abandoned ? "abandoned" : DescribeStatus(r.status);
    return Check("gpu", false, "nvidia-smi failed (" + how + "): " + LastLines(r.output, 3) +
                                   " — the driver or a GPU is unhealthy; see nvidia-smi and the kernel log (dmesg, Xid errors)");
  }
  json gpus = json::array();
  std::istringstream in(r.output);
  std::string names;
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> f;
    std::istringstream ls(line);
    for (std::string x; std::getline(ls, x, ',');) {
      const size_t a = x.find_first_not_of(' '), b = x.find_last_not_of(" \r");
      f.push_back(a == std::string::npos ? "" : x.substr(a, b - a + 1));
    }
    if (f.size() < 3 || f[0].empty()) continue;
    // "81559 MiB": the number first.
    gpus.push_back({{"name", f[0]}, {"memory_total_mb", std::atof(f[1].c_str())}, {"memory_used_mb", std::atof(f[2].c_str())}});
    if (!names.empty()) names += ", ";
    names += f[0];
  }
  if (gpus.empty()) return Check("gpu", false, "nvidia-smi listed no GPU: " + LastLines(r.output, 3));
  json c = Check("gpu", true, std::to_string(gpus.size()) + " GPU(s): " + names);
  c["gpus"] = gpus;
  c["count"] = gpus.size();
  return c;
}

json CheckCommand(const HealthCheckOptions& o) {
  if (o.command.empty()) return Skipped("command", "no health-check command configured");
  const double t0 = MonotonicSeconds();
  const ShellRun r = RunShell(o.command, o.command_env, o.command_timeout_s, o.stop);
  if (!r.error.empty()) return Check("command", false, "could not run the health-check command: " + r.error);
  const std::string tail = LastLines(r.output, kOutputLines);
  std::string detail;
  bool ok = false;
  if (r.abandoned) {
    detail = "abandoned: the job was stopped";
  } else if (r.timed_out) {
    detail = "`" + o.command + "` did not finish within " + Fmt(o.command_timeout_s, 0) + " s (killed)";
  } else {
    ok = WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0;
    detail = "`" + o.command + "` ended with " + DescribeStatus(r.status);
  }
  if (!tail.empty()) detail += "; output: " + tail;
  json c = Check("command", ok, detail);
  c["command"] = o.command;
  if (!r.timed_out && !r.abandoned && WIFEXITED(r.status)) c["exit_code"] = WEXITSTATUS(r.status);
  c["timed_out"] = r.timed_out;
  c["seconds"] = MonotonicSeconds() - t0;
  return c;
}

json RunLocalHealthChecks(const HealthCheckOptions& o) {
  json checks = json::array();
  for (auto* check : {&CheckCpu, &CheckMemory, &CheckDisk, &CheckGpu, &CheckCommand}) {
    const double t0 = MonotonicSeconds();
    json c = check(o);
    if (!c.contains("seconds")) c["seconds"] = MonotonicSeconds() - t0;
    checks.push_back(std::move(c));
  }
  return checks;
}

bool AllChecksOk(const json& checks) {
  for (const json& c : checks) {
    if (!c.value("ok", false)) return false;
  }
  return true;
}

std::string DescribeFailedChecks(const json& checks) {
  std::string out;
  for (const json& c : checks) {
    if (c.value("ok", false)) continue;
    if (!out.empty()) out += "; ";
    out += c.value("name", std::string("?"));
    out += ": ";
    out += c.value("detail", std::string());
  }
  return out.empty() ? "all checks passed" : out;
}

}  // namespace anneal
