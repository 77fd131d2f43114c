// safetensors files: Hugging Face weights (`anneal hf import`, train.init_from) and our own
// checkpoints' shards (core/safetensors.h). Every tensor a parsed header lists is read back in the
// dtype it has; no read may leave the file image.
#include "core/safetensors.h"
#include "fuzz/fuzz_target.h"

ANNEAL_FUZZ_TARGET(safetensors) {
  auto r = anneal::SafeTensorsReader::FromBytes(anneal::fuzz::Text(data, size), "fuzz.safetensors");
  if (!r.ok()) {
    FUZZ_EXPECT(!r.status().message().empty());
    return 0;
  }
  for (const auto& [name, t] : (*r)->tensors()) {
    auto bytes = (*r)->Bytes(name);
    FUZZ_EXPECT(bytes.ok());
    FUZZ_EXPECT(bytes->size() == t.end - t.begin);
    (void)(*r)->ReadF64(name);
    (void)(*r)->ReadF32(name);
    (void)(*r)->ReadI32(name);
  }
  return 0;
}
