// bench/s3_throughput: anneal's s3:// ObjectStore putting and getting N objects of S MB (random bytes)
// under URI, one after another; prints "put MB/s" and "get MB/s" (and checks what it read back).
// Usage: s3_throughput URI SIZE_MB COUNT   (endpoint and credentials from the environment, as anneal)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "storage/object_store.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s URI SIZE_MB COUNT\n", argv[0]);
    return 2;
  }
  auto store = anneal::OpenObjectStore(argv[1]);
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().message().c_str());
    return 2;
  }
  const size_t size = static_cast<size_t>(std::atof(argv[2]) * 1e6);
  const int count = std::atoi(argv[3]);
  std::mt19937_64 rng(1);
  std::string data(size, '\0');
  for (size_t i = 0; i + 8 <= size; i += 8) {
    const uint64_t v = rng();
    data.replace(i, 8, reinterpret_cast<const char*>(&v), 8);
  }
  auto now = [] { return std::chrono::steady_clock::now(); };
  auto t0 = now();
  for (int i = 0; i < count; ++i) {
    anneal::Status s = (*store)->Put("bench/obj-" + std::to_string(i), data);
    if (!s.ok()) {
      std::fprintf(stderr, "put: %s\n", s.message().c_str());
      return 3;
    }
  }
  const double put_s = std::chrono::duration<double>(now() - t0).count();
  t0 = now();
  for (int i = 0; i < count; ++i) {
    auto got = (*store)->Get("bench/obj-" + std::to_string(i));
    if (!got.ok() || *got != data) {
      std::fprintf(stderr, "get: %s\n", got.ok() ? "different bytes" : got.status().message().c_str());
      return 3;
    }
  }
  const double get_s = std::chrono::duration<double>(now() - t0).count();
  std::printf("put %.1f MB/s\nget %.1f MB/s\n", size * count / 1e6 / put_s, size * count / 1e6 / get_s);
  return 0;
}
