#include "agent/dir_sync.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "launch/nofollow.h"

namespace anneal {

namespace {

bool IsCommitMarker(const std::string& rel) {
  const std::string base = BaseName(rel);
  // manifest.json: anneal's checkpoints; .metadata: torch.distributed.checkpoint's, written last too.
  return base == "manifest.json" || base == ".metadata" || (base.size() > 9 && base.compare(base.size() - 9, 9, ".complete") == 0);
}

}  // namespace

Result<std::unique_ptr<DirSync>> DirSync::Open(const std::string& local_dir, const std::string& uri,
                                               const StorageVars& vars) {
  ANNEAL_ASSIGN_OR_RETURN(auto store, OpenObjectStore(uri, Env::Default(), vars));
  return Open(local_dir, std::move(store));
}

Result<std::unique_ptr<DirSync>> DirSync::Open(const std::string& local_dir, std::unique_ptr<ObjectStore> store) {
  ANNEAL_RETURN_IF_ERROR(Env::Default().CreateDirs(local_dir));
  return std::unique_ptr<DirSync>(new DirSync(local_dir, std::move(store)));
}

Result<int> DirSync::Restore() {
  Env& env = Env::Default();
  ANNEAL_ASSIGN_OR_RETURN(auto objects, store_->ListAll(""));
  int n = 0;
  // Commit markers last here too: a crash mid-restore leaves no manifest without its files.
  for (int pass = 0; pass < 2; ++pass) {
    for (const ObjectInfo& o : objects) {
      if (IsCommitMarker(o.key) != (pass == 1)) continue;
      const std::string path = JoinPath(local_, o.key);
      if (auto sz = env.FileSize(path); sz.ok() && *sz == o.size) continue;
      ANNEAL_ASSIGN_OR_RETURN(std::string data, store_->Get(o.key));
      const size_t slash = path.rfind('/');
      if (slash != std::string::npos) ANNEAL_RETURN_IF_ERROR(env.CreateDirs(path.substr(0, slash)));
      ANNEAL_RETURN_IF_ERROR(env.WriteFileAtomic(path, data));
      ++n;
    }
  }
  // What came from the URI need not go back.
  ANNEAL_ASSIGN_OR_RETURN(auto files, env.ListFilesRecursive(local_, Env::kHiddenToo));
  for (const std::string& f : files) {
    struct stat st {};
    if (::stat(f.c_str(), &st) == 0) {
      sent_[f.substr(local_.size() + 1)] = {static_cast<uint64_t>(st.st_size), st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec};
    }
  }
  return n;
}

Result<int> DirSync::Upload() {
  Env& env = Env::Default();
  ANNEAL_ASSIGN_OR_RETURN(auto files, env.ListFilesRecursive(local_, Env::kHiddenToo));
  std::vector<std::pair<std::string, std::pair<uint64_t, int64_t>>> todo, markers;
  for (const std::string& f : files) {
    if (f.find(".tmp.") != std::string::npos) continue;  // a write in progress (Env::WriteFileAtomic)
    struct stat st {};
    // Root uploads what a job wrote: a link it planted (to /etc/shadow, another job's folder) is not
    // followed, here nor when the file is read (ReadNoFollow).
    if (::lstat(f.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    const std::string rel = f.substr(local_.size() + 1);
    const std::pair<uint64_t, int64_t> sig{static_cast<uint64_t>(st.st_size),
                                           st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec};
    auto it = sent_.find(rel);
    if (it != sent_.end() && it->second == sig) continue;
    (IsCommitMarker(rel) ? markers : todo).push_back({rel, sig});
  }
  // The folder itself opened following its own path (a configured folder); what is inside, without.
  Fd dir(::open(local_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0) return IoError("open " + local_ + ": " + std::strerror(errno));
  int n = 0;
  for (auto* list : {&todo, &markers}) {
    for (const auto& [rel, sig] : *list) {
      auto data = ReadBelow(dir.get(), local_, rel);
      if (!data.ok() && data.status().code() == Code::kInvalidInput) continue;  // became a link meanwhile: skipped
      ANNEAL_RETURN_IF_ERROR(data.status());
      ANNEAL_RETURN_IF_ERROR(store_->Put(rel, *data));
      sent_[rel] = sig;
      ++n;
    }
  }
  return n;
}

}  // namespace anneal
