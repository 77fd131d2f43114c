#include "launch/nofollow.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace anneal {

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.release();
  }
  return *this;
}

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

namespace {

Status Errno(const std::string& what) { return IoError(what + ": " + std::strerror(errno)); }

std::vector<std::string> Components(const std::string& path) {
  std::vector<std::string> out;
  size_t at = 1;
  while (at <= path.size()) {
    const size_t end = std::min(path.find('/', at), path.size());
    if (end > at) out.push_back(path.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

}  // namespace

namespace {

// rel's components (relative to the folder at dir_fd, named base in messages), each opened with
// O_NOFOLLOW from the one above: the core of OpenNoFollow and ReadBelow.
Result<Fd> OpenBelow(int dir_fd, const std::string& base, const std::string& rel, bool create, const ParentCheck& check_parent) {
  const std::vector<std::string> parts = Components("/" + rel);
  Fd fd(::openat(dir_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return Errno("open " + base);
  std::string at = base == "/" ? "" : base;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& c = parts[i];
    if (c == "." || c == "..") return InvalidInput("'" + base + "/" + rel + "' has a '" + c + "' component: name the folder itself");
    const bool last = i + 1 == parts.size();
    if (check_parent) {
      struct stat st {};
      if (::fstat(fd.get(), &st) != 0) return Errno("stat " + (at.empty() ? "/" : at));
      ANNEAL_RETURN_IF_ERROR(check_parent(at.empty() ? "/" : at, st));
    }
    at += "/" + c;
    if (create && ::mkdirat(fd.get(), c.c_str(), 0755) != 0 && errno != EEXIST) return Errno("mkdir " + at);
    Fd next(::openat(fd.get(), c.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC | (last ? 0 : O_DIRECTORY)));
    if (next.get() < 0) {
      if (errno == ENOTDIR || errno == ELOOP) {
        return InvalidInput(at + " is a symbolic link or not a folder: name the real folder (links are not followed)");
      }
      return Errno("open " + at);
    }
    if (last) {
      struct stat st {};
      if (::fstat(next.get(), &st) != 0) return Errno("stat " + at);
      if (S_ISLNK(st.st_mode)) return InvalidInput(at + " is a symbolic link: name the real folder or file (links are not followed)");
    }
    fd = std::move(next);
  }
  return fd;
}

// The content of the regular file an O_PATH fd names (reopened through /proc/self/fd, never a path).
Result<std::string> ReadAll(const Fd& at, const std::string& name, struct stat* st_out) {
  Fd fd(::open(ProcFdPath(at.get()).c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st {};
  if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0) return Errno("open " + name);
  if (!S_ISREG(st.st_mode)) return InvalidInput(name + " is not a regular file");
  if (st_out) *st_out = st;
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno("read " + name);
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

}  // namespace

std::string ProcFdPath(int fd) { return "/proc/self/fd/" + std::to_string(fd); }

Result<Fd> OpenNoFollow(const std::string& path, bool create, const ParentCheck& check_parent) {
  if (path.empty() || path[0] != '/') return InvalidInput("'" + path + "' is not an absolute path");
  Fd root(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (root.get() < 0) return Errno("open /");
  return OpenBelow(root.get(), "/", path.substr(1), create, check_parent);
}

Result<std::string> ReadNoFollow(const std::string& path, struct stat* st) {
  ANNEAL_ASSIGN_OR_RETURN(Fd at, OpenNoFollow(path, false));
  return ReadAll(at, path, st);
}

Result<std::string> ReadBelow(int dir_fd, const std::string& base, const std::string& rel) {
  ANNEAL_ASSIGN_OR_RETURN(Fd at, OpenBelow(dir_fd, base, rel, false, {}));
  return ReadAll(at, base + "/" + rel, nullptr);
}

namespace {

Status Walk(int dir_fd, const std::string& prefix, const WalkFn& fn, int depth) {
  if (depth > 256) return IoError("folders nested deeper than 256 under " + prefix);
  Fd rd(::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (rd.get() < 0) return Errno("open " + (prefix.empty() ? std::string(".") : prefix));
  DIR* d = ::fdopendir(rd.release());
  if (!d) return Errno("fdopendir " + prefix);
  Status out = Status::Ok();
  const int dfd = ::dirfd(d);
  while (out.ok()) {
    errno = 0;
    const dirent* e = ::readdir(d);
    if (!e) {
      if (errno != 0) out = Errno("readdir " + prefix);
      break;
    }
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string rel = prefix.empty() ? name : prefix + "/" + name;
    struct stat st {};
    if (::fstatat(dfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;  // gone meanwhile
      out = Errno("stat " + rel);
      break;
    }
    out = fn(dfd, name, rel, st);
    if (!out.ok() || !S_ISDIR(st.st_mode)) continue;
    Fd sub(::openat(dfd, name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (sub.get() < 0) {
      if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP) continue;  // replaced meanwhile: not entered
      out = Errno("open " + rel);
      break;
    }
    out = Walk(sub.get(), rel, fn, depth + 1);
  }
  ::closedir(d);
  return out;
}

}  // namespace

Status WalkNoFollow(int dir_fd, const WalkFn& fn) { return Walk(dir_fd, "", fn, 0); }

Status ChownTreeNoFollow(int dir_fd, uid_t uid, gid_t gid) {
  if (::fchownat(dir_fd, "", uid, gid, AT_EMPTY_PATH) != 0) return Errno("chown to uid " + std::to_string(uid));
  return WalkNoFollow(dir_fd, [&](int parent, const std::string& name, const std::string& rel, const struct stat&) {
    if (::fchownat(parent, name.c_str(), uid, gid, AT_SYMLINK_NOFOLLOW) != 0 && errno != ENOENT) {
      return Errno("chown " + rel + " to uid " + std::to_string(uid));
    }
    return Status::Ok();
  });
}

}  // namespace anneal
