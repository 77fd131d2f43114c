#include "control/port_owner.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace anneal {

namespace {

// The inode of a socket in LISTEN state (st 0A) on `port` in one /proc/net table, or "".
std::string ListeningInode(const char* table, int port) {
  std::ifstream in(table);
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string sl, local, remote, st, queues, timer, retr, uid, timeout, inode;
    if (!(f >> sl >> local >> remote >> st >> queues >> timer >> retr >> uid >> timeout >> inode)) continue;
    const size_t colon = local.rfind(':');
    if (colon == std::string::npos || st != "0A") continue;
    if (std::strtol(local.c_str() + colon + 1, nullptr, 16) == port) return inode;
  }
  return "";
}

std::string ProcessName(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

}  // namespace

std::string PortOwner(int port) {
  std::string inode = ListeningInode("/proc/net/tcp", port);
  if (inode.empty()) inode = ListeningInode("/proc/net/tcp6", port);
  if (inode.empty()) return "";
  const std::string want = "socket:[" + inode + "]";
  DIR* proc = ::opendir("/proc");
  if (!proc) return "a process";
  std::string found;
  for (dirent* e; found.empty() && (e = ::readdir(proc)) != nullptr;) {
    const std::string pid = e->d_name;
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string fds = "/proc/" + pid + "/fd";
    DIR* d = ::opendir(fds.c_str());
    if (!d) continue;
    for (dirent* f; (f = ::readdir(d)) != nullptr;) {
      char target[128];
      const std::string link = fds + "/" + f->d_name;
      const ssize_t n = ::readlink(link.c_str(), target, sizeof(target) - 1);
      if (n > 0 && std::string(target, static_cast<size_t>(n)) == want) {
        found = "pid " + pid + " (" + ProcessName(pid) + ")";
        break;
      }
    }
    ::closedir(d);
  }
  ::closedir(proc);
  return found.empty() ? "a process of another user" : found;
}

}  // namespace anneal
