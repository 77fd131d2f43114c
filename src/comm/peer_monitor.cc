#include "comm/peer_monitor.h"
#include "core/clock.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>

namespace anneal {

std::string JoinInts(const std::vector<int>& v) {
  std::ostringstream s;
  for (size_t i = 0; i < v.size(); ++i) s << (i ? "," : "") << v[i];
  return s.str();
}

Result<CommOptions> ResolveMembers(const CommOptions& options) {
  CommOptions o = options;
  if (o.members.empty()) {
    for (int r = 0; r < o.world_size; ++r) o.members.push_back(r);
  }
  if (std::find(o.members.begin(), o.members.end(), o.global_rank) == o.members.end()) {
    return InvalidInput("rank " + std::to_string(o.global_rank) + " is not a member of group '" + o.group + "' (ranks " +
                        JoinInts(o.members) + ")");
  }
  return o;
}

int GroupRankOf(const CommOptions& o) {
  return static_cast<int>(std::find(o.members.begin(), o.members.end(), o.global_rank) - o.members.begin());
}

std::string DefaultBindAddress(const Store& store, const std::string& master_addr) {
  // A TCP store: the interface that routes to its host. A shared-folder store: the one that routes
  // to MASTER_ADDR, else this host's name as the resolver gives it.
  const std::string d = store.Describe();
  const size_t at = d.find(" at ");
  std::string host;
  if (at != std::string::npos) {
    host = d.substr(at + 4);
    host = host.substr(0, host.find(':'));
  } else if (!master_addr.empty()) {
    host = master_addr;
  } else {
    char name[256] = {0};
    ::gethostname(name, sizeof(name) - 1);
    host = name;
  }
  auto a = LocalAddressToward(host.empty() ? "127.0.0.1" : host);
  return a.ok() ? *a : "127.0.0.1";
}

Status PublishAddress(Store* store, const CommOptions& o, const std::string& addr) {
  return store->Set(o.group + "/addr/" + std::to_string(o.global_rank), addr);
}

std::vector<std::string> ReadAddresses(Store* store, const CommOptions& o) {
  std::vector<std::string> addrs(o.members.size());
  for (size_t i = 0; i < o.members.size(); ++i) {
    auto a = store->Get(o.group + "/addr/" + std::to_string(o.members[i]), o.timeout);
    if (a.ok()) addrs[i] = *a;
  }
  return addrs;
}

PeerMonitor::PeerMonitor(Store* store, CommOptions o, std::vector<std::string> addrs)
    : store_(store), o_(std::move(o)), addrs_(std::move(addrs)), me_(GroupRankOf(o_)) {
  addrs_.resize(o_.members.size());
  thread_ = std::thread([this] { Heartbeat(); });
}

PeerMonitor::~PeerMonitor() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

// Every heartbeat_interval: +1 on "<group>/hb/<global rank>". A frozen or dead rank's count stops.
void PeerMonitor::Heartbeat() {
  const std::string key = o_.group + "/hb/" + std::to_string(o_.global_rank);
  std::unique_lock<std::mutex> l(mu_);
  while (!stopping_) {
    l.unlock();
    (void)store_->Add(key, 1);
    l.lock();
    cv_.wait_for(l, o_.heartbeat_interval, [&] { return stopping_; });
  }
}

// Which peers are lost: those whose heartbeat does not advance over ~2.5 intervals, and those
// whose address the transport's error names.
std::string PeerMonitor::Diagnose(const std::string& what, const std::string& transport_error, double seconds) {
  std::ostringstream m;
  m << what << " in group '" << o_.group << "' (ranks " << JoinInts(o_.members) << ") failed on rank "
    << o_.global_rank << " after " << static_cast<int>(seconds * 10) / 10.0 << " s: ";
  auto snapshot = [&](std::map<int, int64_t>* hb) -> Status {
    for (int r : o_.members) {
      if (r == o_.global_rank) continue;
      ANNEAL_ASSIGN_OR_RETURN(auto v, store_->TryGet(o_.group + "/hb/" + std::to_string(r)));
      (*hb)[r] = v ? std::strtoll(v->c_str(), nullptr, 10) : -1;
    }
    return Status::Ok();
  };
  std::map<int, int64_t> a, b;
  Status s = snapshot(&a);
  if (s.ok()) {
    Clock::Real().SleepFor(2.5 * std::chrono::duration<double>(o_.heartbeat_interval).count());
    s = snapshot(&b);
  }
  std::vector<int> lost;
  if (s.ok()) {
    for (auto [r, v] : a) {
      if (b[r] == v) lost.push_back(r);
    }
  }
  // Ranks on the host named in the transport's error ("[10.0.0.2]:port").
  std::set<int> named;
  for (size_t i = 0; i < o_.members.size(); ++i) {
    if (o_.members[i] == o_.global_rank || addrs_[i].empty() || addrs_[i] == addrs_[me_]) continue;
    if (transport_error.find("[" + addrs_[i] + "]") != std::string::npos) named.insert(o_.members[i]);
  }
  if (!lost.empty()) {
    m << "lost rank" << (lost.size() > 1 ? "s " : " ") << JoinInts(lost) << " (no heartbeat for "
      << o_.heartbeat_interval.count() * 2.5 / 1000 << " s: killed, frozen or cut off";
    for (int r : lost) {
      for (size_t i = 0; i < o_.members.size(); ++i) {
        if (o_.members[i] == r && !addrs_[i].empty()) m << "; rank " << r << " on " << addrs_[i];
      }
    }
    m << ")";
  } else if (!s.ok()) {
    m << "lost contact with " << store_->Describe() << " as well";
    if (!named.empty()) {
      m << "; lost rank" << (named.size() > 1 ? "s " : " ") << JoinInts(std::vector<int>(named.begin(), named.end()));
      m << " (on " << addrs_[std::distance(o_.members.begin(),
                                           std::find(o_.members.begin(), o_.members.end(), *named.begin()))]
        << ")";
    }
    if (named.empty()) {
      std::vector<int> others;
      for (size_t i = 0; i < o_.members.size(); ++i) {
        if (addrs_[i] != addrs_[me_]) others.push_back(o_.members[i]);
      }
      if (!others.empty()) m << "; unreachable: rank" << (others.size() > 1 ? "s " : " ") << JoinInts(others) << " (other hosts)";
    }
    m << " (" << s.message() << ")";
  } else if (!named.empty()) {
    m << "lost rank" << (named.size() > 1 ? "s " : " ") << JoinInts(std::vector<int>(named.begin(), named.end()));
  } else {
    m << "every peer's heartbeat is alive: a peer is slow or stuck in other work (raise dist.timeout_s if "
         "steps are legitimately this long)";
  }
  m << ". Transport: " << transport_error;
  return m.str();
}

}  // namespace anneal
