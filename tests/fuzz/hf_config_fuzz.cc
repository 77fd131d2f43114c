// Hugging Face config.json (`anneal hf import`, train.init_from hf://): read by every registered
// family. Property: a config a family accepts is written back (HfConfig) to a text the same family
// reads to the same model.
#include "fuzz/fuzz_target.h"
#include "model/family.h"

ANNEAL_FUZZ_TARGET(hf_config) {
  const std::string text = anneal::fuzz::Text(data, size);
  for (const anneal::ModelFamily* f : anneal::Families()) {
    auto c = f->FromHfConfig(text, "fuzz/config.json");
    if (!c.ok()) {
      FUZZ_EXPECT(c.status().message().find("fuzz/config.json") != std::string::npos);
      continue;
    }
    auto again = f->FromHfConfig(f->HfConfig(*c, "float32"), "written/config.json");
    FUZZ_EXPECT(again.ok());
  }
  return 0;
}
