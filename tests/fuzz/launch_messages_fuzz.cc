// The launcher's messages between nodes (launch/leader_command.h: a node's info and a rank's setup,
// read from the rendezvous store) and the sandbox plan the root helper reads (launch/sandbox.h).
// The first byte picks the reader. Property: what parses serializes and parses back to the same text.
#include "fuzz/fuzz_target.h"
#include "launch/leader_command.h"
#include "launch/sandbox.h"

ANNEAL_FUZZ_TARGET(launch_messages) {
  if (size == 0) return 0;
  const std::string text = anneal::fuzz::Text(data + 1, size - 1);
  switch (data[0] % 3) {
    case 0:
      if (auto n = anneal::NodeInfoFromJson(text); n.ok()) {
        const std::string once = anneal::NodeInfoToJson(*n);
        auto again = anneal::NodeInfoFromJson(once);
        FUZZ_EXPECT(again.ok() && anneal::NodeInfoToJson(*again) == once);
      }
      break;
    case 1:
      if (auto s = anneal::RankSetupFromJson(text); s.ok()) {
        const std::string once = anneal::RankSetupToJson(*s);
        auto again = anneal::RankSetupFromJson(once);
        FUZZ_EXPECT(again.ok() && anneal::RankSetupToJson(*again) == once);
      }
      break;
    default:
      if (auto p = anneal::SandboxPlanFromJson(text); p.ok()) {
        const std::string once = anneal::SandboxPlanToJson(*p);
        auto again = anneal::SandboxPlanFromJson(once);
        FUZZ_EXPECT(again.ok() && anneal::SandboxPlanToJson(*again) == once);
      }
      break;
  }
  return 0;
}
