#include "data/channel.h"

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "core/checksum.h"
#include "core/env.h"
#include "core/progress.h"
#include "data/dataset.h"
#include "storage/object_store.h"

namespace anneal {

namespace {

constexpr const char* kMarker = ".anneal-channel-complete";

bool IsRemote(const std::string& uri) {
  const size_t s = uri.find("://");
  return s != std::string::npos && uri.compare(0, s, "file") != 0;
}

// A channel copied by local rank 0: the others wait for its marker.
Result<std::string> AwaitLocalRankZero(const std::string& uri, const std::string& local, const ChannelOptions& o) {
  const std::string marker = JoinPath(local, kMarker);
  const double deadline = o.clock->Monotonic() + o.wait_s;
  while (!Env::Default().Exists(marker)) {
    if (o.clock->Monotonic() > deadline) {
      return PeerError("local rank 0 did not finish copying " + uri + " to " + local + " within " +
                       std::to_string(static_cast<int>(o.wait_s)) + " s");
    }
    o.clock->SleepFor(0.1);
  }
  return local;
}

// Checksums by file name from the channel's dataset.json, when it has one.
Result<std::map<std::string, uint64_t>> DatasetChecksums(ObjectStore& store, const std::vector<ObjectInfo>& objects,
                                                         const std::string& uri) {
  std::map<std::string, uint64_t> want;
  for (const auto& obj : objects) {
    if (obj.key != "dataset.json") continue;
    ANNEAL_ASSIGN_OR_RETURN(std::string text, store.Get("dataset.json"));
    ANNEAL_ASSIGN_OR_RETURN(DatasetInfo info, DatasetInfo::FromJson(text, uri + "/dataset.json"));
    for (const auto& s : info.shards) {
      if (s.xxh64) want[s.file] = *s.xxh64;
    }
  }
  return want;
}

// Copies a channel's objects into a local folder with parallel workers; an object already there
// from an earlier run, whole and right, is kept.
class ChannelCopy {
 public:
  ChannelCopy(ObjectStore& store, std::string uri, std::string local, std::map<std::string, uint64_t> want)
      : store_(store), uri_(std::move(uri)), local_(std::move(local)), want_(std::move(want)) {}

  Status Run(const std::vector<ObjectInfo>& objects, const ChannelOptions& o) {
    uint64_t total = 0;
    for (const auto& obj : objects) total += obj.size;
    Progress progress("copying " + uri_ + " to " + local_, total);
    progress.set_quiet(o.quiet);
    progress.Start();
    std::atomic<size_t> next{0};
    auto worker = [&] {
      for (size_t i; (i = next.fetch_add(1)) < objects.size() && ok();) {
        Status s = CopyOne(objects[i]);
        if (!s.ok()) {
          std::lock_guard<std::mutex> l(mu_);
          if (first_.ok()) first_ = s;
          return;
        }
        progress.Add(objects[i].size, 1, 0);
      }
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < std::max(1, std::min<int>(o.parallel, static_cast<int>(objects.size()))); ++t) {
      threads.emplace_back(worker);
    }
    for (auto& t : threads) t.join();
    progress.Stop();
    return first_;
  }

  std::string Summary() const { return std::to_string(fetched_) + " bytes copied, " + std::to_string(kept_) + " kept\n"; }

 private:
  bool ok() {
    std::lock_guard<std::mutex> l(mu_);
    return first_.ok();
  }

  Status CopyOne(const ObjectInfo& obj) {
    Env& env = Env::Default();
    const std::string path = JoinPath(local_, obj.key);
    auto it = want_.find(obj.key);
    auto size = env.FileSize(path);
    if (size.ok() && *size == obj.size) {
      auto have = env.ReadFile(path);
      if (have.ok() && (it == want_.end() || Xxh64(*have) == it->second)) {
        kept_ += obj.size;
        return Status::Ok();
      }
    }
    ANNEAL_ASSIGN_OR_RETURN(std::string data, store_.GetIfMatch(obj.key, obj.etag));
    if (data.size() != obj.size) {
      return PeerError("object '" + obj.key + "' in " + uri_ + " changed while it was copied (" +
                       std::to_string(data.size()) + " bytes, listed as " + std::to_string(obj.size) + ")");
    }
    if (it != want_.end() && Xxh64(data) != it->second) {
      return InvalidInput("shard '" + obj.key + "' in " + uri_ + " fails the checksum its dataset.json gives: the "
                          "upload is damaged or from another dataset; upload the folder again");
    }
    ANNEAL_RETURN_IF_ERROR(env.CreateDirs(path.substr(0, path.rfind('/'))));
    ANNEAL_RETURN_IF_ERROR(env.WriteFileAtomic(path, data));
    fetched_ += obj.size;
    return Status::Ok();
  }

  ObjectStore& store_;
  const std::string uri_, local_;
  const std::map<std::string, uint64_t> want_;
  std::mutex mu_;
  Status first_;
  std::atomic<uint64_t> fetched_{0}, kept_{0};
};

}  // namespace

Result<std::string> PrepareDataChannel(const std::string& uri, const ChannelOptions& o) {
  if (o.mode == "shared") {
    if (IsRemote(uri)) {
      return InvalidInput("data.dir = '" + uri + "' is not a mounted path, but data.mode is shared: use data.mode = file "
                          "to copy it to local disk first, or mount it");
    }
    return uri.rfind("file://", 0) == 0 ? uri.substr(7) : uri;
  }
  if (o.mode == "fastfile") return uri;
  if (o.mode != "file") return InvalidInput("data.mode = '" + o.mode + "' must be shared, file or fastfile");
  Env& env = Env::Default();
  const std::string local = !o.local_dir.empty() ? o.local_dir : "/tmp/anneal-channels/" + HexU64(Xxh64(uri));
  if (o.local_rank != 0) return AwaitLocalRankZero(uri, local, o);
  const std::string marker = JoinPath(local, kMarker);
  (void)env.Remove(marker);
  ANNEAL_ASSIGN_OR_RETURN(auto store, OpenObjectStore(uri, Env::Default(), o.storage));
  ANNEAL_ASSIGN_OR_RETURN(auto objects, store->ListAll(""));
  if (objects.empty()) {
    return InvalidInput("data.dir = '" + uri + "' holds no objects: check the URI (prepare the data with anneal prep "
                        "and upload the folder)");
  }
  ANNEAL_ASSIGN_OR_RETURN(auto want, DatasetChecksums(*store, objects, uri));
  ANNEAL_RETURN_IF_ERROR(env.CreateDirs(local));
  ChannelCopy copy(*store, uri, local, std::move(want));
  ANNEAL_RETURN_IF_ERROR(copy.Run(objects, o));
  ANNEAL_RETURN_IF_ERROR(env.WriteFileAtomic(marker, copy.Summary()));
  return local;
}

Result<std::shared_ptr<RemoteDataset>> OpenRemoteDataset(const std::string& uri) {
  ANNEAL_ASSIGN_OR_RETURN(auto owned, OpenObjectStore(uri));
  std::shared_ptr<ObjectStore> store(std::move(owned));
  ANNEAL_ASSIGN_OR_RETURN(auto objects, store->ListAll(""));
  auto listed = std::make_shared<std::map<std::string, ObjectInfo>>();
  for (auto& o : objects) (*listed)[o.key] = o;
  auto r = std::make_shared<RemoteDataset>();
  r->where = uri;
  r->get = [store](const std::string& key) { return store->Get(key); };
  r->size = [listed, uri](const std::string& key) -> Result<uint64_t> {
    auto it = listed->find(key);
    if (it == listed->end()) {
      return InvalidInput("dataset.json in " + uri + " names shard '" + key + "', which is not there: upload it again");
    }
    return it->second.size;
  };
  r->range = [store, listed](const std::string& key, uint64_t off, uint64_t n, std::string* out) -> Status {
    ANNEAL_ASSIGN_OR_RETURN(*out, store->GetIfMatch(key, listed->at(key).etag, off, n));
    return Status::Ok();
  };
  return r;
}

}  // namespace anneal
