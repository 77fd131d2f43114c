// The agent-server protocol (protocol/wire.h), both ways: the heartbeat answers and assignments an
// agent reads from its server, the heartbeats and node reports a server reads from its agents, and
// `--since` times. The first byte picks the reader; the rest is JSON (or the time's text).
#include "core/bounded_parse.h"
#include "fuzz/fuzz_target.h"
#include "protocol/wire.h"

ANNEAL_FUZZ_TARGET(wire) {
  if (size == 0) return 0;
  const std::string text = anneal::fuzz::Text(data + 1, size - 1);
  if (data[0] % 5 == 4) {
    (void)anneal::ParseSince(text, 1.8e9);
    return 0;
  }
  auto j = anneal::ParseJsonBounded(text);
  if (!j.ok()) return 0;
  switch (data[0] % 5) {
    case 0: {
      auto r = anneal::HeartbeatReplyFromJson(*j);
      if (r.ok()) FUZZ_EXPECT(anneal::HeartbeatReplyFromJson(anneal::ToJson(*r)).ok());
      break;
    }
    case 1: {
      auto a = anneal::AssignmentFromJson(*j);
      if (a.ok()) FUZZ_EXPECT(anneal::AssignmentFromJson(anneal::ToJson(*a)).ok());
      break;
    }
    case 2: (void)anneal::NodeReportFromJson(*j); break;
    default:
      (void)anneal::HeartbeatMsgFromJson(*j);
      (void)anneal::LogLineFromJson(*j);
      (void)anneal::MetricPointFromJson(*j);
      break;
  }
  return 0;
}
