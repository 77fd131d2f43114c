#include "storage/object_store.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <map>

namespace anneal {

namespace {

// A temporary file of Env::WriteFileAtomic ("<name>.tmp.<pid>.<n>"): never an object.
bool IsTempName(const std::string& path) {
  const size_t t = path.rfind(".tmp.");
  if (t == std::string::npos) return false;
  size_t dots = 0;
  for (size_t i = t + 5; i < path.size(); ++i) {
    if (path[i] == '.') ++dots;
    else if (!std::isdigit(static_cast<unsigned char>(path[i]))) return false;
  }
  return dots == 1;
}

class FileObjectStore : public ObjectStore {
 public:
  FileObjectStore(Env& env, std::string root) : env_(env), root_(std::move(root)) {}

  Result<std::string> Get(const std::string& key, uint64_t offset, uint64_t length) override {
    ANNEAL_RETURN_IF_ERROR(ValidateKey(key));
    const std::string path = JoinPath(root_, key);
    if (!env_.Exists(path) || env_.IsDirectory(path)) return NotFound("no object '" + key + "' in " + Describe());
    ANNEAL_ASSIGN_OR_RETURN(auto f, env_.OpenForRead(path));
    const uint64_t size = f->Size();
    if (offset > size) {
      return InvalidInput("range starts at byte " + std::to_string(offset) + " but '" + key + "' has " +
                          std::to_string(size) + " bytes");
    }
    const uint64_t n = std::min(length, size - offset);
    std::string out(n, '\0');
    ANNEAL_ASSIGN_OR_RETURN(size_t got, f->Read(offset, n, out.data()));
    if (got != n) return IoError("short read of " + path + ": the object changed while it was read");
    return out;
  }

  Status Put(const std::string& key, std::string_view data) override {
    ANNEAL_RETURN_IF_ERROR(ValidateKey(key));
    const std::string path = JoinPath(root_, key);
    const size_t slash = path.rfind('/');
    if (slash != std::string::npos) ANNEAL_RETURN_IF_ERROR(env_.CreateDirs(path.substr(0, slash)));
    return env_.WriteFileAtomic(path, data);
  }

  Result<std::optional<ObjectInfo>> Head(const std::string& key) override {
    ANNEAL_RETURN_IF_ERROR(ValidateKey(key));
    return Info(key);
  }

  Result<ListPage> List(const std::string& prefix, const std::string& continuation, int max_keys) override {
    if (max_keys < 1) return InvalidInput("list: max_keys must be at least 1");
    // Walk only the folder the prefix names (its part up to the last '/').
    const size_t slash = prefix.rfind('/');
    const std::string dir = slash == std::string::npos ? "" : prefix.substr(0, slash);
    const std::string start = dir.empty() ? root_ : JoinPath(root_, dir);
    ListPage page;
    if (!env_.IsDirectory(start)) return page;
    ANNEAL_ASSIGN_OR_RETURN(std::vector<std::string> files, env_.ListFilesRecursive(start, Env::kHiddenToo));
    std::vector<std::string> keys;
    for (const std::string& f : files) {
      if (IsTempName(f)) continue;
      std::string key = f.substr(root_.size() + (root_.back() == '/' ? 0 : 1));
      if (key.rfind(prefix, 0) == 0 && key > continuation) keys.push_back(std::move(key));
    }
    std::sort(keys.begin(), keys.end());
    for (const std::string& k : keys) {
      if (static_cast<int>(page.objects.size()) == max_keys) {
        page.next = page.objects.back().key;
        break;
      }
      ANNEAL_ASSIGN_OR_RETURN(auto info, Info(k));
      if (info) page.objects.push_back(*info);  // deleted meanwhile: skipped
    }
    return page;
  }

  Status Delete(const std::string& key) override {
    ANNEAL_RETURN_IF_ERROR(ValidateKey(key));
    const std::string path = JoinPath(root_, key);
    if (!env_.Exists(path)) return Status::Ok();
    return env_.Remove(path);
  }

  std::string Describe() const override { return "file://" + root_; }

 private:
  Result<std::optional<ObjectInfo>> Info(const std::string& key) {
    struct stat st {};
    const std::string path = JoinPath(root_, key);
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::optional<ObjectInfo>();
    ObjectInfo info;
    info.key = key;
    info.size = static_cast<uint64_t>(st.st_size);
    // Size, inode and modification time: a rewrite (a new file renamed over the old) changes the inode.
    info.etag = std::to_string(st.st_size) + "-" + std::to_string(st.st_ino) + "-" +
                std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
    return std::optional<ObjectInfo>(info);
  }

  Env& env_;
  std::string root_;
};

}  // namespace

Status ValidateKey(const std::string& key) {
  auto bad = [&](const std::string& why) {
    return InvalidInput("object key '" + key + "' is invalid: " + why);
  };
  if (key.empty()) return bad("it is empty");
  if (key[0] == '/') return bad("it starts with '/' (keys are relative to the store's root)");
  if (key.find('\0') != std::string::npos) return bad("it contains a NUL byte");
  size_t start = 0;
  while (start <= key.size()) {
    size_t end = key.find('/', start);
    if (end == std::string::npos) end = key.size();
    const std::string part = key.substr(start, end - start);
    if (part == "." || part == "..") return bad("it has a '" + part + "' component");
    if (part.empty() && end != key.size()) return bad("it has an empty component ('//')");
    start = end + 1;
  }
  if (key.back() == '/') return bad("it ends with '/' (that names a folder, not an object)");
  return Status::Ok();
}

Result<std::string> ObjectStore::GetIfMatch(const std::string& key, const std::string& etag, uint64_t offset,
                                            uint64_t length) {
  ANNEAL_ASSIGN_OR_RETURN(auto info, Head(key));
  if (!info) return NotFound("no object '" + key + "' in " + Describe());
  if (info->etag != etag) {
    return PeerError("object '" + key + "' in " + Describe() + " changed while it was being read (its ETag is no longer " +
                     etag + "): another writer replaced it; read it again from the start");
  }
  return Get(key, offset, length);
}

Result<std::vector<ObjectInfo>> ObjectStore::ListAll(const std::string& prefix) {
  std::vector<ObjectInfo> all;
  std::string token;
  do {
    ANNEAL_ASSIGN_OR_RETURN(ListPage page, List(prefix, token, 1000));
    all.insert(all.end(), page.objects.begin(), page.objects.end());
    token = page.next;
  } while (!token.empty());
  return all;
}

namespace {
std::map<std::string, ObjectStoreFactory>& Schemes() {
  static std::map<std::string, ObjectStoreFactory> m;
  return m;
}
}  // namespace

void RegisterObjectStoreScheme(const std::string& scheme, ObjectStoreFactory factory) {
  Schemes()[scheme] = std::move(factory);
}

Result<std::unique_ptr<ObjectStore>> OpenObjectStore(const std::string& uri, Env& env, const StorageVars& vars) {
  std::string path = uri;
  if (uri.rfind("s3://", 0) == 0) return OpenS3ObjectStore(uri, vars);
  if (const size_t sep = uri.find("://"); sep != std::string::npos && Schemes().count(uri.substr(0, sep))) {
    return Schemes()[uri.substr(0, sep)](uri, env);
  }
  if (uri.rfind("file://", 0) == 0) {
    path = uri.substr(7);
  } else if (uri.find("://") != std::string::npos) {
    return InvalidInput("object store URI '" + uri + "' has an unsupported scheme: use file:///path or "
                        "s3://bucket/prefix");
  } else {
    // "s3:/bucket" or "s3:bucket": a scheme without "//" is a mistyped URI, not a folder named "s3:".
    const size_t colon = uri.find(':'), slash = uri.find('/');
    bool scheme = colon != std::string::npos && colon > 0 && (slash == std::string::npos || colon < slash);
    for (size_t i = 0; scheme && i < colon; ++i) scheme = std::isalnum(static_cast<unsigned char>(uri[i])) != 0;
    if (scheme) {
      return InvalidInput("object store URI '" + uri + "' is malformed: write " + uri.substr(0, colon) +
                          "://bucket/prefix (two slashes), or ./" + uri + " for a folder of that name");
    }
  }
  if (path.empty()) return InvalidInput("object store URI '" + uri + "' names no folder");
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  ANNEAL_RETURN_IF_ERROR(env.CreateDirs(path));
  return std::unique_ptr<ObjectStore>(new FileObjectStore(env, path));
}

void FaultObjectStore::FailNth(Op op, int nth, Status error) {
  planned_.push_back({op, calls_[static_cast<int>(op)] + nth, std::move(error)});
}

Status FaultObjectStore::Check(Op op) {
  const int n = ++calls_[static_cast<int>(op)];
  for (const Planned& p : planned_) {
    if (p.op == op && p.at == n) return p.error;
  }
  return Status::Ok();
}

Result<std::string> FaultObjectStore::Get(const std::string& key, uint64_t offset, uint64_t length) {
  ANNEAL_RETURN_IF_ERROR(Check(Op::kGet));
  return base_->Get(key, offset, length);
}

Status FaultObjectStore::Put(const std::string& key, std::string_view data) {
  ANNEAL_RETURN_IF_ERROR(Check(Op::kPut));
  return base_->Put(key, data);
}

Result<std::optional<ObjectInfo>> FaultObjectStore::Head(const std::string& key) {
  ANNEAL_RETURN_IF_ERROR(Check(Op::kHead));
  return base_->Head(key);
}

Result<ListPage> FaultObjectStore::List(const std::string& prefix, const std::string& continuation, int max_keys) {
  ANNEAL_RETURN_IF_ERROR(Check(Op::kList));
  return base_->List(prefix, continuation, max_keys);
}

Status FaultObjectStore::Delete(const std::string& key) {
  ANNEAL_RETURN_IF_ERROR(Check(Op::kDelete));
  return base_->Delete(key);
}

}  // namespace anneal
