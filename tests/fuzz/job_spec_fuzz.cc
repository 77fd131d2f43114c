// Job specs as users submit them: `anneal submit`'s YAML or JSON file, and the API's JSON body
// (protocol/job_definition.h). Properties: an accepted spec serializes (ToJson) to a document that
// parses back to the same document; a refused one says why.
#include "fuzz/fuzz_target.h"
#include "protocol/job_definition.h"

ANNEAL_FUZZ_TARGET(job_spec) {
  const std::string text = anneal::fuzz::Text(data, size);
  std::string field;
  auto spec = anneal::ParseJobSpec(text, &field);
  if (!spec.ok()) {
    FUZZ_EXPECT(!spec.status().message().empty());
    return 0;
  }
  const nlohmann::json doc = spec->ToJson();
  auto again = anneal::JobSpecFromJson(doc);
  FUZZ_EXPECT(again.ok());
  FUZZ_EXPECT(again->ToJson() == doc);
  (void)spec->RankArgv();
  return 0;
}
