// The server's parts that need no HTTP: the agents' sessions (claims, grants, warm-pool holds on a
// SimulatedClock), the health rounds' choice of check, and the agent protocol's messages (wire.h).
#include <gtest/gtest.h>

#include <thread>

#include "provision/instance_provider.h"
#include "control/agent_sessions.h"
#include "control/health_rounds.h"
#include "control/job_summary.h"
#include "protocol/wire.h"
#include "core/clock.h"

namespace anneal {
namespace {

using nlohmann::json;

TEST(AgentSessions, ClaimsAndGrantsAreKeptPerInstance) {
  AgentSessions s;
  s.Claim("i1", {"job-1", 0, 5.0});
  s.Claim("i1", {"", -1, 6.0});  // the last heartbeat's claim wins
  ASSERT_EQ(s.Claims().size(), 1u);
  EXPECT_EQ(s.Claims().at("i1").job, "");
  EXPECT_EQ(s.Claims().at("i1").at, 6.0);
  EXPECT_FALSE(s.Granted("i1", "job-1"));
  s.Grant("i1", "job-1");
  EXPECT_TRUE(s.Granted("i1", "job-1"));
  EXPECT_FALSE(s.Granted("i2", "job-1"));
  EXPECT_FALSE(s.Granted("i1", "job-2"));
}

TEST(AgentSessions, AHoldEndsWhenThePoolIsTakenOrTheTimeIsUp) {
  SimulatedClock clock;
  AgentSessions s(clock);
  const double t0 = clock.Monotonic();
  EXPECT_FALSE(s.HoldUntilTaken("i1", 2.0));  // nobody takes it: the whole (simulated) wait
  EXPECT_GE(clock.Monotonic() - t0, 2.0);
  s.Taken({"i1"});  // taken before the hold: the hold returns at once
  const double t1 = clock.Monotonic();
  EXPECT_TRUE(s.HoldUntilTaken("i1", 2.0));
  EXPECT_EQ(clock.Monotonic(), t1);
  EXPECT_FALSE(s.HoldUntilTaken("i1", 0.5));  // consumed by the first hold
  // Taken by another thread while held (real clock: the hold wakes at once, well before 30 s).
  AgentSessions real;
  std::thread taker([&] { real.Taken({"i2"}); });
  EXPECT_TRUE(real.HoldUntilTaken("i2", 30));
  taker.join();
  real.Stop();
  EXPECT_FALSE(real.HoldUntilTaken("i3", 30));  // stopped: no hold
}

JobRecord Starting(int count) {
  JobSpec s;
  s.name = "j";
  s.command = {"true"};
  s.instance_count = count;
  JobRecord j;
  j.id = "job";
  j.attempt = 1;
  j.phase = JobPhase::kStarting;
  j.spec = s;
  return j;
}

InstanceRecord Inst(const std::string& id, int node, double registered) {
  InstanceRecord i;
  i.id = id;
  i.job_id = "job";
  i.node = node;
  i.address = "10.0.0." + std::to_string(node + 1);
  i.registered_at = registered;
  return i;
}

TEST(HealthRounds, EveryInstanceChecksOnceAllRegistered) {
  HealthPolicy policy;
  policy.collective_mb = 4;
  const JobRecord j = Starting(2);
  std::vector<InstanceRecord> mine = {Inst("a", 0, 10), Inst("b", 1, 0)};
  EXPECT_FALSE(HealthCheckFor(policy, j, mine, {}, 0, mine[0], json::object()));  // b has not registered
  mine[1].registered_at = 11;
  auto check = HealthCheckFor(policy, j, mine, {}, 0, mine[1], json::object());
  ASSERT_TRUE(check);
  EXPECT_EQ((*check)["node"], 1);
  EXPECT_EQ((*check)["nnodes"], 2);
  EXPECT_EQ((*check)["attempt"], 1);
  EXPECT_EQ((*check)["addresses"], json({"10.0.0.1", "10.0.0.2"}));
  EXPECT_EQ((*check)["checks"]["collective_mb"], 4);
  // Running it already, or done with this round: nothing. A later round: asked again.
  EXPECT_FALSE(HealthCheckFor(policy, j, mine, {}, 0, mine[1], {{"job", "job"}, {"attempt", 1}, {"round", 0}}));
  const HealthRecord done = HealthResultFrom("b", {{"node", 1}, {"ok", true}, {"round", 0}, {"result", json::object()}}, 12);
  EXPECT_EQ(done.result["round"], 0);
  EXPECT_FALSE(HealthCheckFor(policy, j, mine, {done}, 0, mine[1], json::object()));
  EXPECT_TRUE(HealthCheckFor(policy, j, mine, {done}, 1, mine[1], json::object()));
  policy.enabled = false;
  EXPECT_FALSE(HealthCheckFor(policy, j, mine, {}, 0, mine[1], json::object()));
}

TEST(StaticBackend, AssignsJoinedAgentsAndObtainsNothing) {
  auto b = MakeStaticBackend();
  EXPECT_EQ(b->name(), kJoinedBackend);
  EXPECT_FALSE(b->obtains());
  EXPECT_EQ(b->capacity(), -1);
  const Status st = b->Obtain({"job", 0, {{"job-a0-n0", "local", 1, "http://x"}}});
  EXPECT_EQ(st.code(), Code::kInternal);
  EXPECT_TRUE(b->Poll().gone.empty());
}

// The summary written directly is the text nlohmann writes for the same object.
TEST(Wire, AJobSummaryIsWhatTheJsonLibraryWouldWrite) {
  JobRecord j;
  j.id = "train-0007";
  j.name = "train";
  j.owner = "alice";
  j.phase = JobPhase::kFailed;
  j.created_at = 1800000000.0;
  j.started_at = 1800000012.125;
  j.ended_at = 1800000099.3;
  j.attempt = 2;
  j.exit_code = 3;
  j.failure_reason = "infrastructure: node 1: \"lost\"\n  last line\twith tab, caf\xc3\xa9";
  j.spec.instance_count = 4;
  const json expected = {{"id", j.id}, {"name", j.name}, {"owner", j.owner}, {"status", "Failed"},
                         {"secondary_status", "Failed"}, {"created_at", j.created_at}, {"started_at", j.started_at},
                         {"ended_at", j.ended_at}, {"attempt", 2}, {"exit_code", 3}, {"failure_reason", j.failure_reason},
                         {"instance_count", 4}};
  EXPECT_EQ(JobSummaryJson(j, nullptr), expected.dump());
  j.warm_pool = {{"status", "Available"}, {"expires_at", 1800000200.5}};
  const std::string why = "queued behind a-0001 (first come, first served)";
  json more = expected;
  more["warm_pool"] = j.warm_pool;
  more["pending_reason"] = why;
  EXPECT_EQ(JobSummaryJson(j, &why), more.dump());
  j.failure_reason = "bad byte \xff";  // invalid UTF-8: refused as the library refuses it
  EXPECT_THROW(JobSummaryJson(j, nullptr), json::exception);
}

TEST(Wire, ParseSinceTakesADurationOrAnIsoTime) {
  const double now = 1800000000.0;
  EXPECT_DOUBLE_EQ(*ParseSince("90s", now), now - 90);
  EXPECT_DOUBLE_EQ(*ParseSince("10m", now), now - 600);
  EXPECT_DOUBLE_EQ(*ParseSince("2h", now), now - 7200);
  EXPECT_DOUBLE_EQ(*ParseSince("1d", now), now - 86400);
  EXPECT_DOUBLE_EQ(*ParseSince("1h30m", now), now - 5400);
  // 2027-01-15T08:00:00Z is 1800000000 s after the epoch.
  EXPECT_DOUBLE_EQ(*ParseSince("2027-01-15T08:00:00Z", now), 1800000000.0);
  EXPECT_EQ(FormatTime(*ParseSince("2027-01-15T08:00:00Z", now)), "2027-01-15T08:00:00.000Z");
  EXPECT_DOUBLE_EQ(*ParseSince("2027-01-15T08:00:00", now), 1800000000.0);  // no offset: UTC
  EXPECT_DOUBLE_EQ(*ParseSince("2027-01-15 08:00", now), 1800000000.0);
  EXPECT_DOUBLE_EQ(*ParseSince("2027-01-15T10:00:00.5+02:00", now), 1800000000.5);
  EXPECT_DOUBLE_EQ(*ParseSince("2027-01-15", now), 1800000000.0 - 8 * 3600);
  for (const char* bad : {"", "10", "5x", "m", "2027-13-01", "2027-01-15T25:00", "2027-01-15T08:00Zjunk", "yesterday"}) {
    auto r = ParseSince(bad, now);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().ExitCode(), 2);
      EXPECT_NE(r.status().message().find("10m"), std::string::npos) << r.status().message();
    }
  }
}

TEST(Wire, TheAgentProtocolsMessagesRoundTrip) {
  HeartbeatMsg hb;
  EXPECT_EQ(ToJson(hb), json::object());  // idle: an empty body
  hb.job = "job";
  hb.attempt = 2;
  hb.health = {{"job", "job"}, {"attempt", 2}, {"round", 1}};
  const HeartbeatMsg back = *HeartbeatMsgFromJson(ToJson(hb));
  EXPECT_EQ(back.job, "job");
  EXPECT_EQ(back.attempt, 2);
  EXPECT_EQ(back.health, hb.health);

  HeartbeatReply r;
  r.action = HeartbeatAction::kRun;
  r.assignment.job = "job";
  r.assignment.attempt = 2;
  r.assignment.node = 1;
  r.assignment.addresses = {"10.0.0.1", "10.0.0.2"};
  r.assignment.spec.name = "j";
  r.assignment.spec.command = {"python3", "train.py"};
  r.assignment.spec.instance_count = 2;
  r.assignment.credentials = {{"AWS_ACCESS_KEY_ID", "AK"}};
  r.assignment.meeting_round = 3;
  const json j = ToJson(r);
  EXPECT_EQ(j["assignment"]["nnodes"], 2);
  EXPECT_FALSE(j.contains("next_s"));
  auto parsed = HeartbeatReplyFromJson(j);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->assignment.spec.command, r.assignment.spec.command);
  EXPECT_EQ(parsed->assignment.addresses, r.assignment.addresses);
  EXPECT_EQ(parsed->assignment.credentials.at("AWS_ACCESS_KEY_ID"), "AK");
  EXPECT_EQ(parsed->assignment.meeting_round, 3);
  EXPECT_EQ((MeetingKey{2, 3}.Path("job-1")), "/v1/jobs/job-1/rendezvous/2/3");
  EXPECT_EQ(parsed->next_s, -1);
  // A spec the agent cannot run is an error naming the field, not a crash.
  json bad = j;
  bad["assignment"]["spec"]["resources"]["instance_count"] = 0;
  auto refused = HeartbeatReplyFromJson(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("resources.instance_count"), std::string::npos) << refused.status().ToString();
  EXPECT_FALSE(HeartbeatReplyFromJson({{"action", "run"}}).ok());
  auto none = HeartbeatReplyFromJson({{"action", "none"}, {"next_s", 0.1}});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->next_s, 0.1);
  EXPECT_EQ(none->action, HeartbeatAction::kNone);
  EXPECT_EQ(j["action"], "run");  // the wire's names are unchanged
  for (HeartbeatAction a : {HeartbeatAction::kNone, HeartbeatAction::kRun, HeartbeatAction::kHealth,
                            HeartbeatAction::kStop, HeartbeatAction::kExit}) {
    HeartbeatReply x;
    x.action = a;
    if (a == HeartbeatAction::kRun) x.assignment = r.assignment;
    auto back = HeartbeatReplyFromJson(ToJson(x));
    ASSERT_TRUE(back.ok()) << HeartbeatActionName(a) << ": " << back.status().ToString();
    EXPECT_EQ(back->action, a) << HeartbeatActionName(a);
  }
  // An action this agent does not know is an error naming it, not a silent no-op.
  auto unknown = HeartbeatReplyFromJson({{"action", "drain"}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("'drain'"), std::string::npos) << unknown.status().ToString();
}

}  // namespace
}  // namespace anneal
