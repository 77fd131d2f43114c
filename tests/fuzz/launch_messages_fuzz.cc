// The launcher's messages between nodes (launch/leader_command.h: a node's info and a rank's setup,
// read from the rendezvous store) and the sandbox plan the root helper reads (launch/sandbox.h).
// The first byte picks the reader. Property: what parses serializes and parses back to the same text.
#include "fuzz/fuzz_target.h"
#include "launch/leader_command.h"
#include "launch/sandbox.h"

namespace {

template <class Read, class Write>
void RoundTrip(const std::string& text, Read read, Write write) {
  auto first = read(text);
  if (!first.ok()) return;
  const std::string once = write(*first);
  auto again = read(once);
  FUZZ_EXPECT(again.ok() && write(*again) == once);
}

}  // namespace

ANNEAL_FUZZ_TARGET(launch_messages) {
  if (size == 0) return 0;
  const std::string text = anneal::fuzz::Text(data + 1, size - 1);
  switch (data[0] % 3) {
    case 0: RoundTrip(text, anneal::NodeInfoFromJson, anneal::NodeInfoToJson); break;
    case 1: RoundTrip(text, anneal::RankSetupFromJson, anneal::RankSetupToJson); break;
    default: RoundTrip(text, anneal::SandboxPlanFromJson, anneal::SandboxPlanToJson); break;
  }
  return 0;
}
