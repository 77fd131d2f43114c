// anneal_fault_proxy: the FaultProxy (tests/storage/fault_proxy.h) as a program, for the chaos soak
// (tests/chaos/soak.py), which puts it between every anneal process and radosgw and changes its
// behaviour while the job runs by rewriting one file.
//
//   anneal_fault_proxy UPSTREAM_HOST UPSTREAM_PORT MODE_FILE
//
// Prints "port N" once listening, then runs until SIGTERM or SIGINT. Each request's action is the
// first word of MODE_FILE when the request arrives: forward (also: a missing or empty file), 503,
// reset, truncate, stall or drop (the names of FaultProxy::Action), or torn: a 503 for the PUT of
// every other object (by a hash of its key) but never a checkpoint's manifest.json, so a checkpoint
// written meanwhile is left with some of its files in the store and others missing (the soak then
// kills a rank: what is resumed must be a whole checkpoint). Every request not forwarded is printed
// as "fault ACTION REQUEST-LINE", so the soak can tell when a fault was actually met.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "storage/fault_proxy.h"

namespace {

// torn's choice for one request line ("PUT /bucket/key?query HTTP/1.1"): a 503 for the PUT of every
// other key, the same key always alike (its retries meet the same answer), never a manifest.json.
anneal::FaultProxy::Action Torn(const std::string& line) {
  using A = anneal::FaultProxy::Action;
  if (line.rfind("PUT ", 0) != 0) return A::kForward;
  const std::string target = line.substr(4, line.find_first_of(" ?", 4) - 4);
  if (target.find("manifest.json") != std::string::npos) return A::kForward;
  return std::hash<std::string>{}(target) % 2 ? A::k503 : A::kForward;
}

anneal::FaultProxy::Action ReadMode(const std::string& file, const std::string& line) {
  using A = anneal::FaultProxy::Action;
  static const std::map<std::string, A> kModes = {{"forward", A::kForward}, {"503", A::k503},
                                                 {"reset", A::kReset},     {"truncate", A::kTruncate},
                                                 {"stall", A::kStall},     {"drop", A::kDropResponse}};
  std::ifstream in(file);
  std::string word;
  if (!(in >> word)) return A::kForward;
  if (word == "torn") return Torn(line);
  const auto it = kModes.find(word);
  return it == kModes.end() ? A::kForward : it->second;
}

const char* Name(anneal::FaultProxy::Action a) {
  using A = anneal::FaultProxy::Action;
  switch (a) {
    case A::k503: return "503";
    case A::kReset: return "reset";
    case A::kTruncate: return "truncate";
    case A::kStall: return "stall";
    case A::kDropResponse: return "drop";
    default: return "forward";
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: anneal_fault_proxy UPSTREAM_HOST UPSTREAM_PORT MODE_FILE\n");
    return 2;
  }
  const std::string mode_file = argv[3];
  // SIGTERM and SIGINT blocked before any thread starts (they inherit the mask): main takes them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  std::mutex out;
  anneal::FaultProxy proxy(argv[1], std::atoi(argv[2]), [&](const std::string& line, int) {
    const auto a = ReadMode(mode_file, line);
    if (a != anneal::FaultProxy::Action::kForward) {
      std::lock_guard<std::mutex> l(out);
      std::printf("fault %s %s\n", Name(a), line.c_str());
      std::fflush(stdout);
    }
    return a;
  });
  std::printf("port %d\n", proxy.port());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop, &sig);
  return 0;
}
