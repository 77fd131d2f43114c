// agent/job_sandbox.h: which folders outside its own a sandboxed job may be given (PrepareGivable).
#include "agent/job_sandbox.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "testing/temp_dir.h"

namespace anneal {
namespace {

constexpr uid_t kEarlierJob = kJobUidBase + 7;
const char* kKey = "http://127.0.0.1:1 job-0001";

class PrepareGivableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "job uids own the folders here: needs root";
  }
  Status Given(const std::string& rel) { return PrepareGivable(t_.File(rel), "checkpoint.local_path", kKey); }
  void Chown(const std::string& rel, uid_t uid) { ASSERT_EQ(::lchown(t_.File(rel).c_str(), uid, uid), 0) << rel; }
  testing::TempDir t_;
};

TEST_F(PrepareGivableTest, ANewFolderIsMade) {
  EXPECT_TRUE(Given("ckpt/run1").ok());
  struct stat st {};
  ASSERT_EQ(::stat(t_.File("ckpt/run1").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
}

TEST_F(PrepareGivableTest, AFolderAnotherNodeOfTheJobJustMadeIsGivenToItAlone) {
  ASSERT_TRUE(Given("ckpt/shared").ok());  // made whole: root's, marked with this job's key
  struct stat st {};
  ASSERT_EQ(::stat(t_.File("ckpt/shared").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_TRUE(Given("ckpt/shared").ok());  // this job's other node, before the folder is given to its uid
  Status other = PrepareGivable(t_.File("ckpt/shared"), "checkpoint.uri", "http://127.0.0.1:1 job-0009");
  EXPECT_EQ(other.code(), Code::kInvalidInput) << "another job's node takes a folder it did not make";
}

TEST_F(PrepareGivableTest, AnEarlierJobsFolderIsGiven) {
  t_.Write("ckpt/step-1/manifest.json", "{}");
  for (const char* p : {"ckpt", "ckpt/step-1", "ckpt/step-1/manifest.json"}) Chown(p, kEarlierJob);
  EXPECT_TRUE(Given("ckpt").ok());
}

TEST_F(PrepareGivableTest, APersonsOrTheSystemsFolderIsRefusedNamingTheField) {
  t_.Write("mine/notes", "x");  // root's
  Status st = Given("mine");
  ASSERT_EQ(st.code(), Code::kInvalidInput);
  EXPECT_NE(st.message().find("checkpoint.local_path: " + t_.File("mine") + " belongs to uid 0"), std::string::npos) << st.message();
  EXPECT_EQ(Given("../etc").code(), Code::kInvalidInput);  // not normalised
  EXPECT_EQ(PrepareGivable("relative/ckpt", "checkpoint.local_path", kKey).code(), Code::kInvalidInput);
}

TEST_F(PrepareGivableTest, AFileNotAJobsInsideAJobsFolderIsRefused) {
  t_.Write("ckpt/planted", "x");
  Chown("ckpt", kEarlierJob);  // planted stays root's: chowning it would give a host file away
  Status st = Given("ckpt");
  ASSERT_EQ(st.code(), Code::kInvalidInput);
  EXPECT_NE(st.message().find("holds planted, which belongs to uid 0"), std::string::npos) << st.message();
}

TEST_F(PrepareGivableTest, ALinkInsideAnEarlierJobsFolderIsRefused) {
  t_.Write("ckpt/step-1/manifest.json", "{}");
  ASSERT_EQ(::symlink("/etc", t_.File("ckpt/planted").c_str()), 0);
  for (const char* p : {"ckpt", "ckpt/step-1", "ckpt/step-1/manifest.json", "ckpt/planted"}) Chown(p, kEarlierJob);
  Status st = Given("ckpt");
  ASSERT_EQ(st.code(), Code::kInvalidInput);
  EXPECT_NE(st.message().find("holds planted, a symbolic link"), std::string::npos) << st.message();
}

TEST_F(PrepareGivableTest, AFolderInsideAJobsFolderIsRefused) {
  t_.Write("jobs/x/keep", "x");
  Chown("jobs", kEarlierJob);  // a job could move x away and put a link in its place
  Status st = Given("jobs/x");
  ASSERT_EQ(st.code(), Code::kInvalidInput);
  EXPECT_NE(st.message().find("lies in " + t_.File("jobs") + ", which belongs to job uid"), std::string::npos) << st.message();
  EXPECT_EQ(Given("jobs/new").code(), Code::kInvalidInput);  // nor is one made there
  EXPECT_FALSE(std::filesystem::exists(t_.File("jobs/new")));
}

TEST_F(PrepareGivableTest, ALinkIsRefusedAndNothingIsMadeThroughIt) {
  ASSERT_EQ(::mkdir(t_.File("target").c_str(), 0755), 0);
  ASSERT_EQ(::symlink(t_.File("target").c_str(), t_.File("link").c_str()), 0);
  Chown("link", kEarlierJob);  // the link itself a job's, as one a job planted
  EXPECT_EQ(Given("link").code(), Code::kInvalidInput);
  EXPECT_EQ(Given("link/ckpt").code(), Code::kInvalidInput);
  EXPECT_FALSE(std::filesystem::exists(t_.File("target/ckpt")));
}

TEST_F(PrepareGivableTest, AFolderOfAJobRunningNowIsRefused) {
  constexpr uid_t kRunning = kJobUidBase + kJobUids - 1;
  t_.Write("ckpt/x", "x");
  Chown("ckpt", kRunning);
  Chown("ckpt/x", kRunning);
  // The uid's lease, held by another job (as an agent running it holds it).
  ASSERT_EQ(::mkdir("/run/anneal", 0700) == 0 || errno == EEXIST, true);
  ASSERT_EQ(::mkdir("/run/anneal/uids", 0700) == 0 || errno == EEXIST, true);
  const std::string lease = "/run/anneal/uids/" + std::to_string(kRunning);
  const int fd = ::open(lease.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  const std::string other = "http://127.0.0.1:1 job-0002";
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0) << "the lease is someone else's right now";
  ASSERT_EQ(::ftruncate(fd, 0), 0);
  ASSERT_EQ(::pwrite(fd, other.data(), other.size(), 0), static_cast<ssize_t>(other.size()));
  ASSERT_EQ(::flock(fd, LOCK_SH), 0);
  Status st = Given("ckpt");
  EXPECT_EQ(st.code(), Code::kInvalidInput);
  EXPECT_NE(st.message().find("belongs to a job that is running now"), std::string::npos) << st.message();
  ::close(fd);  // released: an ended job's folder is given
  EXPECT_TRUE(Given("ckpt").ok());
  ::unlink(lease.c_str());
}

}  // namespace
}  // namespace anneal
