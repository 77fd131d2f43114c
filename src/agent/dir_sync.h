// DirSync: keeps a job's local checkpoint (or output) folder and its URI in step (the job spec's
// checkpoint.uri / checkpoint.local_path, SageMaker's contract): Restore() copies every object under
// the URI into the folder before the ranks start (so a restarted job finds its checkpoints where it
// left them); Upload() copies files new or changed since the last upload (by size and mtime) to the
// URI, every file named manifest.json or .metadata (torch.distributed.checkpoint's) or ending in
// .complete after all the others, so a reader of the URI never sees a manifest whose files are not
// there yet. Hidden files are files like any other here (both ways).
// Thread-safety: one thread.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "core/status.h"
#include "storage/object_store.h"

namespace anneal {

class DirSync {
 public:
  // vars: explicit storage settings (the job's execution-role credentials).
  static Result<std::unique_ptr<DirSync>> Open(const std::string& local_dir, const std::string& uri,
                                               const StorageVars& vars = {});
  // Over a store the caller opened (tests wrap one to watch the order of writes).
  static Result<std::unique_ptr<DirSync>> Open(const std::string& local_dir, std::unique_ptr<ObjectStore> store);
  // Objects copied in / files copied out, for the agent's log.
  Result<int> Restore();
  Result<int> Upload();

 private:
  DirSync(std::string local, std::unique_ptr<ObjectStore> store) : local_(std::move(local)), store_(std::move(store)) {}
  std::string local_;
  std::unique_ptr<ObjectStore> store_;
  std::map<std::string, std::pair<uint64_t, int64_t>> sent_;  // relative path -> (size, mtime ns)
};

}  // namespace anneal
