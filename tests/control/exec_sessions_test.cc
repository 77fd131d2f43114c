// anneal exec's sessions on the server (control/exec_sessions.h) and base64 (core/crypto.h); the whole
// path through an agent is tested in tests/e2e/control_policies_test.sh section 8.
#include "control/exec_sessions.h"

#include <gtest/gtest.h>

#include <thread>

#include "core/crypto.h"

namespace anneal {
namespace {

TEST(Base64, RoundTripsAnyBytes) {
  for (const std::string& s : {std::string(""), std::string("a"), std::string("ab"), std::string("abc"),
                              std::string("\0\xff\x80 binary\n", 12)}) {
    bool ok = false;
    EXPECT_EQ(Base64Decode(Base64Encode(s), &ok), s);
    EXPECT_TRUE(ok);
  }
  EXPECT_EQ(Base64Encode("hello"), "aGVsbG8=");
  bool ok = true;
  Base64Decode("abc", &ok);
  EXPECT_FALSE(ok);
}

TEST(ExecSessions, OutputInOrderThenTheExitCodeAndInputToItsEnd) {
  ExecSessions s;
  const std::string id = s.Create({"job-1", "job-1-a0-n0", "carol", 0, {"sh"}, true, false}, 100);
  auto taken = s.TakeFor("job-1-a0-n0");
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0]["id"], id);
  EXPECT_TRUE(s.TakeFor("job-1-a0-n0").empty());  // handed out once
  EXPECT_TRUE(s.TakeFor("other").empty());
  s.AddInput(id, "ls\n", false);
  auto in = s.Input(id, 0, 0);
  ASSERT_EQ(in["chunks"].size(), 1u);
  EXPECT_EQ(Base64Decode(in["chunks"][0]["data"].get<std::string>()), "ls\n");
  EXPECT_FALSE(in["eof"]);
  s.AddInput(id, "", true);
  EXPECT_TRUE(s.Input(id, 1, 0)["eof"]);
  // A reader waiting for output is woken by it.
  std::thread agent([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    s.AddOutput(id, 1, "a");
    s.AddOutput(id, 2, "b");
    s.Finish(id, 3, "", 101);
  });
  auto out = s.Output(id, 0, 5);
  agent.join();
  ASSERT_GE(out["chunks"].size(), 1u);
  EXPECT_EQ(out["chunks"][0]["stream"], 1);
  auto rest = s.Output(id, out["chunks"].back()["seq"].get<int64_t>(), 0);
  if (out["chunks"].size() == 1) {
    ASSERT_EQ(rest["chunks"].size(), 1u);
    EXPECT_EQ(rest["chunks"][0]["stream"], 2);
  }
  EXPECT_TRUE(rest["done"]);
  EXPECT_EQ(rest["exit_code"], 3);
  EXPECT_EQ(s.Output("exec-none", 0, 0)["exit_code"], 255);
}

}  // namespace
}  // namespace anneal
