// Env: anneal's one door to the local file system (LevelDB's Env). Code that touches disk takes an
// Env& so tests can swap in a fault-injecting one (tests/core/fault_env.h).
//
// Thread-safety: every method may be called from many threads at once. Files returned are owned by
// the caller (unique_ptr) and are not themselves thread-safe unless said.
// Failure: every method returns a Status naming the path and the errno text; none throws.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace anneal {

// A file opened for positional reads.
class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;
  // Reads up to n bytes at offset into dst; returns the count read (short only at end of file).
  virtual Result<size_t> Read(uint64_t offset, size_t n, char* dst) const = 0;
  virtual uint64_t Size() const = 0;
};

// A file being written sequentially. Close() flushes and fsyncs; a file not closed is not durable.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual Status Append(std::string_view data) = 0;
  virtual Status Close() = 0;
};

// A read-only memory map of a whole file. The bytes stay valid while the object lives.
class MappedFile {
 public:
  virtual ~MappedFile() = default;
  virtual const char* data() const = 0;
  virtual uint64_t size() const = 0;
};

class Env {
 public:
  virtual ~Env() = default;
  // The process-wide POSIX Env. Never null; lives forever.
  static Env& Default();

  virtual Result<std::unique_ptr<RandomAccessFile>> OpenForRead(const std::string& path) = 0;
  // kPopulate faults every page in at once (MAP_POPULATE): for a file about to be read whole by
  // several threads, whose page faults would otherwise contend; kLazy maps pages as touched.
  enum class MapMode { kLazy, kPopulate };
  virtual Result<std::unique_ptr<MappedFile>> Map(const std::string& path, MapMode mode) = 0;
  // Creates or truncates path.
  virtual Result<std::unique_ptr<WritableFile>> OpenForWrite(const std::string& path) = 0;
  // Atomic replace: after success, `to` names what `from` named (POSIX rename).
  virtual Status Rename(const std::string& from, const std::string& to) = 0;
  virtual Status Remove(const std::string& path) = 0;
  virtual Status CreateDirs(const std::string& path) = 0;
  virtual bool Exists(const std::string& path) = 0;
  virtual bool IsDirectory(const std::string& path) = 0;
  virtual Result<uint64_t> FileSize(const std::string& path) = 0;
  // Names (not paths) in a directory, sorted bytewise; "." and ".." left out.
  virtual Result<std::vector<std::string>> ListDir(const std::string& path) = 0;

  // Helpers built on the primitives above.
  Result<std::string> ReadFile(const std::string& path);
  // Writes data to path.tmp.<unique>, fsyncs, then renames over path: a reader sees the old file or
  // the whole new one, never a part. On failure the temporary file is removed.
  Status WriteFileAtomic(const std::string& path, std::string_view data);
  // Every regular file below path (or path itself if it is a file), sorted. Hidden names (a leading
  // '.') are skipped unless hidden is kHiddenToo: inputs skip them (.git, editors' files); a store or
  // a synced folder keeps them (torch.distributed.checkpoint's .metadata is a file like any other).
  enum Hidden { kSkipHidden, kHiddenToo };
  Result<std::vector<std::string>> ListFilesRecursive(const std::string& path, Hidden hidden = kSkipHidden);
};

// A unique temporary name next to path ("<path>.tmp.<pid>.<counter>"), for write-then-rename.
std::string TempPathFor(const std::string& path);
// "a/b" + "c" -> "a/b/c".
std::string JoinPath(const std::string& a, const std::string& b);
// This process's executable (/proc/self/exe), or "anneal" where that cannot be read.
std::string SelfExecutable();
std::string BaseName(const std::string& path);

}  // namespace anneal
