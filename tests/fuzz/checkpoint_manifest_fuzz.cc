// A checkpoint's manifest.json as resume, `anneal checkpoints` and `anneal eval` read it from the
// store (ckpt/checkpoint.h): anyone who can write the bucket controls it. The input is the manifest of
// step-00000002 in a file store (on /dev/shm), beside a small shard file. Properties: listing, finding
// the newest, verifying and reading the model config and tokenizer never crash, and a manifest that
// verifies names a model config that reads.
#include <filesystem>
#include <memory>

#include "ckpt/checkpoint.h"
#include "core/safetensors.h"
#include "fuzz/fuzz_target.h"
#include "storage/object_store.h"

namespace {

struct Folder {
  std::string dir;
  std::unique_ptr<anneal::ObjectStore> store;
  Folder() {
    char tmpl[] = "/dev/shm/anneal_fuzz_ckpt.XXXXXX";
    char tmpl2[] = "/tmp/anneal_fuzz_ckpt.XXXXXX";
    const char* d = ::mkdtemp(tmpl);
    dir = d ? d : ::mkdtemp(tmpl2);
    store = std::move(*anneal::OpenObjectStore(dir));
    anneal::SafeTensorsWriter w;
    const float v[4] = {1, 2, 3, 4};
    w.AddF32("wte", {2, 2}, v);
    (void)store->Put("step-00000002/attempt-0/model.safetensors", w.Serialize());
  }
  ~Folder() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

}  // namespace

ANNEAL_FUZZ_TARGET(checkpoint_manifest) {
  static Folder f;
  anneal::ObjectStore& s = *f.store;
  const std::string name = "step-00000002";
  FUZZ_EXPECT(s.Put(name + "/manifest.json", anneal::fuzz::Text(data, size)).ok());
  (void)anneal::ListCheckpoints(s);
  (void)anneal::FindNewestCheckpoint(s);
  const bool whole = anneal::VerifyCheckpoint(s, name).ok();
  auto config = anneal::ReadCheckpointModelConfig(s, name);
  if (whole) FUZZ_EXPECT(config.ok());
  (void)anneal::TokenizerOfCheckpoint("", s, name);
  return 0;
}
