#include "core/dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

namespace anneal {

namespace {
std::string LockPath(const std::string& dir) { return dir + "/.owner.lock"; }
}  // namespace

Status HoldDirLock(const std::string& dir) {
  const int fd = ::open(LockPath(dir).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return IoError("cannot open " + LockPath(dir));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return InvalidInput(dir + " is in use by another live process (its " + LockPath(dir) +
                        " is held): give each agent a --work-dir of its own");
  }
  return Status::Ok();  // fd stays open: the lock lasts as long as this process
}

bool DirLockFree(const std::string& dir) {
  const int fd = ::open(LockPath(dir).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;
  const bool free = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  ::close(fd);  // releases it when taken here
  return free;
}

}  // namespace anneal
