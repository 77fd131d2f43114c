// agent/attempt_end.h as data: what each way an attempt ends on a node reports to the server.
#include "agent/attempt_end.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

namespace anneal {
namespace {

ExitCause Warned(std::string* why) {
  *why = "interrupted: the instance got SIGTERM";
  return ExitCause::kInterrupted;
}

LaunchResult Failed(int code, int rank, bool local, int status = 0) {
  LaunchResult r;
  r.exit_code = code;
  r.failed_rank = rank;
  r.failure_local = local;
  r.failed_status = status;
  r.summary = code ? "rank " + std::to_string(rank) + " exited with " + std::to_string(code) : "";
  return r;
}

TEST(AttemptEndTest, ACleanFinishIsNoFailure) {
  const AttemptEnd e = EndOfLaunch(Failed(0, -1, false), {}, Warned);
  EXPECT_EQ(e.exit_code, 0);
  EXPECT_EQ(e.cause, ExitCause::kNone);
  EXPECT_EQ(e.summary, "ranks finished with exit code 0");
}

TEST(AttemptEndTest, AStoppingRuleDecidesItsOwnRetry) {
  AttemptFacts f;
  f.rule_fired = true;
  f.rule_message = "loss went NaN";
  f.rule_retry = false;
  AttemptEnd e = EndOfLaunch(Failed(0, 1, true), f, Warned);
  EXPECT_EQ(e.exit_code, 1);  // ranks that exited 0 on the rule's stop still fail the attempt
  EXPECT_EQ(e.cause, ExitCause::kUserError);
  EXPECT_EQ(e.failed_rank, -1);
  EXPECT_TRUE(e.local);
  EXPECT_EQ(e.summary.rfind("loss went NaN\n", 0), 0u) << e.summary;
  f.rule_retry = true;
  EXPECT_EQ(EndOfLaunch(Failed(0, 1, true), f, Warned).cause, ExitCause::kInfrastructure);
}

TEST(AttemptEndTest, RanksThatSavedOnTheAgentsSignalDidNotComplete) {
  AttemptFacts f;
  f.signalled = true;
  const AttemptEnd e = EndOfLaunch(Failed(0, -1, false), f, Warned);
  EXPECT_EQ(e.exit_code, 1);
  EXPECT_EQ(e.cause, ExitCause::kInterrupted);
  EXPECT_EQ(e.summary, "interrupted: the instance got SIGTERM; the ranks saved a checkpoint and exited");
}

TEST(AttemptEndTest, AHangIsInfrastructureAndAnOomKillIsNamed) {
  AttemptFacts f;
  f.hung = true;
  f.hang_message = "no output for 60 s";
  AttemptEnd e = EndOfLaunch(Failed(137, 0, true, SIGKILL), f, Warned);
  EXPECT_EQ(e.cause, ExitCause::kInfrastructure);
  EXPECT_EQ(e.summary.rfind("no output for 60 s\n", 0), 0u);
  AttemptFacts oom;
  oom.oom_counted = true;
  oom.memory_mb = 512;
  e = EndOfLaunch(Failed(3, 2, true, SIGKILL), oom, Warned);
  EXPECT_EQ(e.cause, ExitCause::kOutOfMemory);
  EXPECT_EQ(e.failed_rank, 2);
  EXPECT_NE(e.summary.find("resources.memory_mb (512 MiB)"), std::string::npos) << e.summary;
}

TEST(AttemptEndTest, InterruptionsBySignalStopOrSomeoneElse) {
  LaunchResult r = Failed(3, 0, false);
  r.interrupted = true;
  AttemptFacts f;
  f.signalled = true;
  AttemptEnd e = EndOfLaunch(r, f, Warned);
  EXPECT_EQ(e.cause, ExitCause::kInterrupted);
  EXPECT_TRUE(e.local);
  f = {};
  e = EndOfLaunch(r, f, Warned);  // nobody here sent it
  EXPECT_EQ(e.cause, ExitCause::kInfrastructure);
  EXPECT_NE(e.summary.find("from outside anneal"), std::string::npos);
  f.stopped = true;
  EXPECT_EQ(EndOfLaunch(r, f, Warned).cause, ExitCause::kStopped);
  EXPECT_EQ(EndOfLaunch(Failed(1, -1, false), {}, Warned).cause, ExitCause::kInfrastructure);  // another node's
}

TEST(AttemptEndTest, ErrorsBeforeTheRanksAndAStopBeforeThem) {
  EXPECT_EQ(EndOfError(InvalidInput("bad spec"), true).cause, ExitCause::kUserError);
  EXPECT_EQ(EndOfError(NotFound("no dataset"), true).cause, ExitCause::kUserError);
  EXPECT_EQ(EndOfError(NotFound("no binary"), false).cause, ExitCause::kInfrastructure);
  EXPECT_EQ(EndOfError(IoError("store down"), true).cause, ExitCause::kInfrastructure);
  EXPECT_EQ(EndOfError(InvalidInput("bad spec"), true).exit_code, 2);
  AttemptEnd e = EndBeforeStart(false, Warned);
  EXPECT_EQ(e.cause, ExitCause::kStopped);
  EXPECT_FALSE(e.local);
  e = EndBeforeStart(true, Warned);
  EXPECT_EQ(e.cause, ExitCause::kInterrupted);
  EXPECT_TRUE(e.local);
}

}  // namespace
}  // namespace anneal
