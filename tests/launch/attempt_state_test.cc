#include "launch/attempt_state.h"

#include <gtest/gtest.h>


#include "core/clock.h"

namespace anneal {
namespace {

// Times come from a SimulatedClock, as the launcher's loop would read them.
TEST(AttemptState, FirstFailureWinsAndTheGraceEndsInSigkill) {
  SimulatedClock clock;
  AttemptState st(15, false);
  const double t0 = clock.Monotonic();
  EXPECT_EQ(st.RankFailed(t0, 1, 256, "rank 1 failed first: exit code 1", 1), StopSignal::kTerm);
  EXPECT_TRUE(st.failed());
  clock.Advance(1);
  EXPECT_EQ(st.Fail(clock.Monotonic(), "another node's rank 3 failed", 3), StopSignal::kNone);
  EXPECT_EQ(st.outcome().failure, "rank 1 failed first: exit code 1");
  EXPECT_EQ(st.outcome().exit_code, 1);
  EXPECT_EQ(st.outcome().failed_rank, 1);
  EXPECT_TRUE(st.outcome().failure_local);
  clock.Advance(14);  // 15 s after the failure: still within the grace
  EXPECT_EQ(st.Tick(clock.Monotonic(), false, true), StopSignal::kNone);
  clock.Advance(0.1);
  EXPECT_EQ(st.Tick(clock.Monotonic(), false, true), StopSignal::kKill);
  clock.Advance(100);
  EXPECT_EQ(st.Tick(clock.Monotonic(), false, true), StopSignal::kNone);  // SIGKILL once
  EXPECT_EQ(st.Kill(clock.Monotonic()), StopSignal::kNone);               // already killed
}

TEST(AttemptState, AnInterruptionIsNotARankFailure) {
  AttemptState st(5, false);
  EXPECT_EQ(st.Interrupt(100, "interrupted by SIGTERM"), StopSignal::kTerm);
  EXPECT_EQ(st.Interrupt(101, "rank 0 was interrupted"), StopSignal::kNone);
  EXPECT_EQ(st.RankFailed(102, 0, 9, "rank 0 failed first: killed by SIGKILL", 3), StopSignal::kNone);
  EXPECT_TRUE(st.interrupted());
  EXPECT_EQ(st.outcome().exit_code, 1);
  EXPECT_EQ(st.outcome().failure, "interrupted by SIGTERM");
  EXPECT_EQ(st.outcome().failed_rank, -1);
  EXPECT_FALSE(st.outcome().failure_local);
  EXPECT_EQ(st.Tick(105.5, false, true), StopSignal::kKill);
}

TEST(AttemptState, AnInterruptionAfterAFailureKeepsTheFailure) {
  AttemptState st(5, false);
  EXPECT_EQ(st.Fail(100, "lost the rendezvous store", 3), StopSignal::kTerm);
  EXPECT_EQ(st.Interrupt(101, "interrupted by a stop request"), StopSignal::kTerm);
  EXPECT_EQ(st.outcome().exit_code, 3);
  EXPECT_EQ(st.outcome().failure, "lost the rendezvous store");
  EXPECT_TRUE(st.interrupted());
}

TEST(AttemptState, AHungJobIsKilledAtOnce) {
  AttemptState st(30, false);
  EXPECT_EQ(st.Kill(100), StopSignal::kKill);
  EXPECT_EQ(st.outcome().exit_code, 3);
  EXPECT_EQ(st.outcome().failure, "killed: the job was declared hung");
  EXPECT_TRUE(st.interrupted());
  EXPECT_EQ(st.Kill(101), StopSignal::kNone);
  EXPECT_EQ(st.Tick(200, false, true), StopSignal::kNone);

  AttemptState failed(30, false);
  failed.Fail(100, "rank 2 failed first: exit code 2", 2);
  EXPECT_EQ(failed.Kill(101), StopSignal::kKill);
  EXPECT_EQ(failed.outcome().exit_code, 2);  // the failure stays the attempt's
  EXPECT_FALSE(failed.interrupted());
}

// mpirun's daemons outliving every rank: the grace, then SIGTERM, then SIGKILL after twice the grace.
TEST(AttemptState, DaemonsOutlivingTheRanksAreStopped) {
  AttemptState st(10, false);
  EXPECT_EQ(st.Tick(100, false, true), StopSignal::kNone);  // a rank still runs
  EXPECT_EQ(st.Tick(101, true, true), StopSignal::kNone);   // the daemons' clock starts
  EXPECT_EQ(st.Tick(111, true, true), StopSignal::kNone);
  EXPECT_EQ(st.Tick(111.5, true, true), StopSignal::kTerm);
  EXPECT_EQ(st.Tick(115, true, true), StopSignal::kNone);
  EXPECT_EQ(st.Tick(121.5, true, true), StopSignal::kKill);
  EXPECT_FALSE(st.failed());
  AttemptState idle(10, false);
  EXPECT_EQ(idle.Tick(500, true, false), StopSignal::kNone);  // nothing left to stop
}

TEST(AttemptState, ANodeWaitingForTheLeader) {
  AttemptState st(10, true);
  EXPECT_TRUE(st.awaiting_leader());
  EXPECT_EQ(st.Tick(100, true, true), StopSignal::kNone);
  EXPECT_EQ(st.Tick(1000, true, true), StopSignal::kNone);  // its daemons run as long as the leader
  st.LeaderDone();
  EXPECT_FALSE(st.awaiting_leader());
  AttemptState failing(10, true);
  failing.Fail(100, "another node's rank 0 failed first", 3);
  EXPECT_FALSE(failing.awaiting_leader());  // a failure ends the wait
}

TEST(AttemptState, PeersAreCheckedEveryHalfSecondUntilAFailure) {
  AttemptState st(10, false);
  EXPECT_TRUE(st.PeerCheckDue(100));
  EXPECT_FALSE(st.PeerCheckDue(100.4));
  EXPECT_TRUE(st.PeerCheckDue(100.6));
  st.Fail(101, "x", 1);
  EXPECT_FALSE(st.PeerCheckDue(200));
}

}  // namespace
}  // namespace anneal
