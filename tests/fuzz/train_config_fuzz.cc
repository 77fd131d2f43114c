// Training configs: the YAML file of `anneal train --config`, and `--set KEY=VALUE` overrides. The
// input's lines after a line "--set" are overrides, the lines before it the file. Properties: an
// accepted config's resolved YAML (--print-config) parses back to the same values; a refused one says
// why.
#include <sstream>

#include "fuzz/fuzz_target.h"
#include "train/config.h"

ANNEAL_FUZZ_TARGET(train_config) {
  const std::string text = anneal::fuzz::Text(data, size);
  std::string yaml = text;
  std::vector<std::string> sets;
  if (const size_t at = text.find("\n--set\n"); at != std::string::npos) {
    yaml = text.substr(0, at + 1);
    std::istringstream in(text.substr(at + 7));
    for (std::string line; std::getline(in, line);) sets.push_back(line);
  }
  auto c = anneal::TrainConfig::Parse(yaml, sets, "fuzz.yaml");
  if (!c.ok()) {
    FUZZ_EXPECT(!c.status().message().empty());
    return 0;
  }
  auto again = anneal::TrainConfig::Parse(c->ResolvedYaml(), {}, "resolved.yaml");
  FUZZ_EXPECT(again.ok());
  FUZZ_EXPECT(again->values == c->values);
  return 0;
}
