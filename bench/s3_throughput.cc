// bench/s3_throughput: anneal's s3:// ObjectStore copying files to a bucket and back — the same work
// bench/s3_throughput.sh gives the peers (s3cmd, the AWS CLI): every file of a folder read from disk
// and put under URI one after another, or every object under URI got and written to a folder.
// Usage: s3_throughput put URI DIR    (DIR's regular files, in name order, each to URI/<name>)
//        s3_throughput get URI DIR    (each object under URI to DIR/<name>)
// Endpoint and credentials come from the environment, as for anneal. Prints "<op> BYTES bytes".
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "storage/object_store.h"

namespace {

int Fail(const std::string& what) {
  std::fprintf(stderr, "s3_throughput: %s\n", what.c_str());
  return 3;
}

// The file's bytes as the page cache holds them (mmap, no copy), handed to Put as one view.
int PutFile(anneal::ObjectStore& store, const std::string& path, const std::string& key, uint64_t& bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  struct stat st{};
  if (fd < 0 || ::fstat(fd, &st) != 0) return Fail("cannot read " + path);
  void* map = st.st_size > 0 ? ::mmap(nullptr, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0) : nullptr;
  ::close(fd);
  if (map == MAP_FAILED) return Fail("cannot map " + path);
  const anneal::Status s = store.Put(key, std::string_view(static_cast<const char*>(map), st.st_size));
  if (map != nullptr) ::munmap(map, st.st_size);
  if (!s.ok()) return Fail("put " + key + ": " + s.message());
  bytes += st.st_size;
  return 0;
}

int GetFile(anneal::ObjectStore& store, const std::string& key, const std::string& path, uint64_t& bytes) {
  auto got = store.Get(key);
  if (!got.ok()) return Fail("get " + key + ": " + got.status().message());
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(got->data(), 1, got->size(), f) != got->size() || std::fclose(f) != 0)
    return Fail("cannot write " + path);
  bytes += got->size();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string op = argc == 4 ? argv[1] : "";
  if (op != "put" && op != "get") {
    std::fprintf(stderr, "usage: %s put|get URI DIR\n", argv[0]);
    return 2;
  }
  auto store = anneal::OpenObjectStore(argv[2]);
  if (!store.ok()) return Fail(store.status().message());
  const std::string dir = argv[3];
  uint64_t bytes = 0;
  if (op == "put") {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir))
      if (e.is_regular_file()) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    for (const auto& n : names)
      if (int rc = PutFile(**store, dir + "/" + n, n, bytes)) return rc;
  } else {
    auto all = (*store)->ListAll("");
    if (!all.ok()) return Fail("list: " + all.status().message());
    std::filesystem::create_directories(dir);
    for (const auto& o : *all)
      if (int rc = GetFile(**store, o.key, dir + "/" + o.key, bytes)) return rc;
  }
  std::printf("%s %llu bytes\n", op.c_str(), static_cast<unsigned long long>(bytes));
  return 0;
}
