// The data a job reads: token-shard headers (data/shard.h), dataset.json (data/dataset.h) and the
// loader's saved position (data/sampler.h), all from storage anyone with write access to a bucket
// controls. The first byte picks the parser; the rest is its input.
#include "data/dataset.h"
#include "data/sampler.h"
#include "data/shard.h"
#include "fuzz/fuzz_target.h"

ANNEAL_FUZZ_TARGET(data_headers) {
  if (size == 0) return 0;
  const std::string text = anneal::fuzz::Text(data + 1, size - 1);
  switch (data[0] % 3) {
    case 0: {
      if (text.size() < anneal::kShardHeaderBytes) return 0;  // the reader refuses a short file before parsing
      // The file's size: the header's own bytes plus the body that follows in the input.
      auto h = anneal::ParseShardHeader("fuzz.bin", std::string_view(text).substr(0, anneal::kShardHeaderBytes),
                                        text.size());
      if (h.ok()) FUZZ_EXPECT(anneal::kShardHeaderBytes + h->tokens * h->token_bytes == text.size());
      break;
    }
    case 1: (void)anneal::DatasetInfo::FromJson(text, "fuzz/dataset.json"); break;
    default: (void)anneal::LoaderPosition::FromJson(text); break;
  }
  return 0;
}
