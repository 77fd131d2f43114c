// Paths opened without following symbolic links, for what root does on behalf of a job (launch/
// sandbox.h, agent/job_sandbox.h): a folder given to a job's uid, a job's folder bound into its
// sandbox. A job may own folders the agent later walks as root (an earlier job's checkpoints, a
// folder its other nodes write while this node prepares): a link planted there, or swapped in
// between a check and a use, must never send a chown or a bind mount to a host file. So every step
// is relative to the fd of the folder above it, opened with O_NOFOLLOW, and the result is an fd,
// used as such (fchownat, a bind of /proc/self/fd/N), never the path again.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <functional>
#include <string>

#include "core/status.h"

namespace anneal {

// A file descriptor closed when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();
  int get() const { return fd_; }
  int release() {
    const int f = fd_;
    fd_ = -1;
    return f;
  }

 private:
  int fd_;
};

// Called with each folder above the last component (its path and stat): an error stops the open.
using ParentCheck = std::function<Status(const std::string& path, const struct stat& st)>;

// Opens an absolute path component by component from /, never following a link: a link (or a
// non-folder) where a folder is expected is an error naming it; "." and ".." components are refused.
// Missing folders are made, mode 0755, when create. The fd is O_PATH | O_CLOEXEC: for fstat, *at
// calls and bind mounts through /proc/self/fd/N. The last component may be a file; a link there is
// refused too.
Result<Fd> OpenNoFollow(const std::string& path, bool create, const ParentCheck& check_parent = {});

// The whole content of the regular file at path, opened as OpenNoFollow opens it (a link anywhere in
// the path is an error); st, when given, gets the file's stat.
Result<std::string> ReadNoFollow(const std::string& path, struct stat* st = nullptr);

// The same for rel below the folder at dir_fd (named base in messages): the folder's own path may hold
// links (a trusted, configured folder), rel may not (what a job wrote inside it).
Result<std::string> ReadBelow(int dir_fd, const std::string& base, const std::string& rel);

// "/proc/self/fd/N": the object an fd names, for a bind mount or a reopen, never a path again.
std::string ProcFdPath(int fd);

// Visits everything below the folder at dir_fd, depth first, each entry through its parent's fd and
// never following a link (a link is visited, not entered): fn(parent_fd, name, path relative to the
// folder, lstat). An error from fn stops the walk.
using WalkFn = std::function<Status(int parent_fd, const std::string& name, const std::string& rel, const struct stat& st)>;
Status WalkNoFollow(int dir_fd, const WalkFn& fn);

// chown of the folder at dir_fd and of everything below it (links themselves, never their targets).
Status ChownTreeNoFollow(int dir_fd, uid_t uid, gid_t gid);

}  // namespace anneal
