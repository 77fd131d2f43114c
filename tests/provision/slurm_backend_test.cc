// The Slurm backend's text and logic against captured Slurm 22.05 output and a fake command runner
// (the real cluster: tests/peers/slurm_test.sh). Also RunCommand, which runs the real tools.
#include <gtest/gtest.h>

#include <deque>

#include "provision/command.h"
#include "provision/slurm_backend.h"
#include "control/server_backend.h"
#include "core/env.h"
#include "testing/temp_dir.h"

namespace anneal {
namespace {

bool Has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
std::string Joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& a : v) s += (s.empty() ? "" : " ") + a;
  return s;
}

GangRequest Gang(const std::string& job, int n, const std::string& type = "cpu") {
  GangRequest g{job, 0, {}};
  for (int k = 0; k < n; ++k) g.instances.push_back({job + "-a0-n" + std::to_string(k), type, 2, "http://10.0.0.1:8470"});
  return g;
}

TEST(RunCommand, CapturesOutputAndExitCodeAndKillsAtItsTimeLimit) {
  auto r = RunCommand({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->out, "out\n");
  EXPECT_EQ(r->err, "err\n");
  EXPECT_EQ(r->exit_code, 3);
  CommandOptions o;
  o.timeout_s = 0.3;
  r = RunCommand({"/bin/sh", "-c", "sleep 30"}, o);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->exit_code, 128 + 9);
  auto missing = RunCommand({"anneal-no-such-tool"});
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(Has(missing.status().message(), "not on PATH")) << missing.status().message();
}

TEST(RunCommand, SetsAndRemovesEnvironmentVariables) {
  ::setenv("ANNEAL_TEST_SECRET", "s3cret", 1);
  CommandOptions o;
  o.unset_env = {"ANNEAL_TEST_SECRET"};
  o.set_env = {{"ANNEAL_TEST_SET", "yes"}};
  auto r = RunCommand({"/bin/sh", "-c", "echo \"[$ANNEAL_TEST_SECRET][$ANNEAL_TEST_SET]\""}, o);
  ::unsetenv("ANNEAL_TEST_SECRET");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->out, "[][yes]\n");
}

TEST(SlurmText, ShellQuotedWordsReadBackExactly) {
  for (const std::string s : {"plain", "two words", "it's", "$HOME `x` \"q\" \\ ;|&", ""}) {
    auto r = RunCommand({"/bin/sh", "-c", "printf %s " + ShellQuote(s)});
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->out, s);
  }
}

TEST(SlurmText, SbatchAsksForOneNodePerInstanceWithTheOperatorsOptions) {
  SlurmOptions o;
  o.partition = "batch";
  o.account = "ml";
  o.time_limit = "1:00:00";
  o.script_dir = "/data/slurm";
  o.tag = "abc";
  o.types["gpu"] = {"gpu-part", "h100", "200G", 8, 16};
  const std::string a = Joined(SbatchArgs(o, Gang("j1", 3, "gpu"), "/data/slurm/x.sh"));
  for (const char* want : {"--parsable", "--job-name=anneal-j1-a0", "--comment=anneal:abc:j1-a0-n0,j1-a0-n1,j1-a0-n2",
                           "--nodes=3", "--ntasks-per-node=1", "--no-requeue", "--signal=TERM@120",
                           "--partition=gpu-part", "--account=ml", "--time=1:00:00", "--gpus-per-node=8",
                           "--cpus-per-task=16", "--mem=200G", "--constraint=h100"}) {
    EXPECT_TRUE(Has(a, want)) << want << " in " << a;
  }
  EXPECT_FALSE(Has(a, "--partition=batch"));  // the type's partition wins
  const std::string plain = Joined(SbatchArgs(o, Gang("j2", 1, "cpu"), "/s.sh"));
  EXPECT_TRUE(Has(plain, "--partition=batch"));
  EXPECT_FALSE(Has(plain, "--gpus-per-node"));
  EXPECT_EQ(SbatchArgs(o, Gang("j2", 1), "/s.sh").back(), "/s.sh");
}

TEST(SlurmText, TheBatchScriptRunsOneAgentPerNodeAndNamesEachSecretFileNotTheSecret) {
  SlurmOptions o;
  o.agent_binary = "/opt/anneal bin/anneal";
  o.work_root = "/scratch/anneal";
  o.script_dir = "/data/slurm";
  const std::string s = BatchScript(o, Gang("j1", 2));
  EXPECT_TRUE(Has(s, "ANNEAL_INSTANCE_IDS='j1-a0-n0 j1-a0-n1'"));
  EXPECT_TRUE(Has(s, "srun --overlap --ntasks-per-node=1"));
  EXPECT_TRUE(Has(s, "'/opt/anneal bin/anneal' agent --server 'http://10.0.0.1:8470'"));
  EXPECT_TRUE(Has(s, "ANNEAL_SECRET_DIR='/data/slurm'"));
  EXPECT_TRUE(Has(s, "--join-token-file \"$ANNEAL_SECRET_DIR/$id.secret\" --remove-join-token-file"));
  EXPECT_FALSE(Has(s, "join.token"));
  EXPECT_TRUE(Has(s, "unset ANNEAL_JOIN_TOKEN"));
  EXPECT_TRUE(Has(s, "trap "));
  // The script is valid shell.
  testing::TempDir t;
  auto r = RunCommand({"/bin/bash", "-n", t.Write("s.sh", s)});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 0) << r->err;
}

TEST(SlurmText, ReadsSqueueScontrolAndSinfoAsSlurmPrintsThem) {
  const std::string squeue =
      "41|RUNNING|None|anneal:abc:j1-a0-n0,j1-a0-n1\n"
      "42|PENDING|Resources|anneal:abc:j2-a0-n0\n"
      "43|PENDING|Priority|(null)\n"
      "44|RUNNING|None|anneal:other:x-a0-n0\n"
      "45|PENDING|ReqNodeNotAvail, UnavailableNodes:n2|anneal:abc:j3-a1-n0,j3-a1-n1\n";
  const auto l = ParseSqueue(squeue, "abc");
  ASSERT_EQ(l.size(), 3u);  // another user's job and another server's are not ours
  EXPECT_EQ(l[0].slurm_id, "41");
  EXPECT_EQ(l[0].ids, (std::vector<std::string>{"j1-a0-n0", "j1-a0-n1"}));
  EXPECT_EQ(l[1].reason, "Resources");
  EXPECT_EQ(l[2].reason, "ReqNodeNotAvail, UnavailableNodes:n2");
  const std::string sc =
      "JobId=41 JobName=anneal-j1-a0 UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901757 Nice=0 "
      "JobState=NODE_FAIL Reason=None Dependency=(null) Requeue=0 Restarts=0 BatchFlag=1 ExitCode=0:0\n";
  EXPECT_EQ(ScontrolField(sc, "JobState"), "NODE_FAIL");
  EXPECT_EQ(ScontrolField(sc, "Reason"), "None");
  EXPECT_EQ(ScontrolField(sc, "State"), "");  // a whole key, not the end of JobState
  EXPECT_EQ(PartitionNodes("debug*|2\ngpu|8\n", ""), 2);
  EXPECT_EQ(PartitionNodes("debug*|2\ngpu|8\n", "gpu"), 8);
  EXPECT_EQ(PartitionNodes("debug*|2\ngpu|8\n", "nope"), -1);
  EXPECT_EQ(PartitionNodes("gpu|8\n", ""), -1);  // no default partition
}

// A fake cluster: each call is recorded, answers come from a queue per tool (an empty queue: exit 0).
struct FakeSlurm {
  std::vector<std::string> calls;
  std::map<std::string, std::deque<CommandResult>> answers;
  CommandRunner Runner() {
    return [this](const std::vector<std::string>& argv) -> Result<CommandResult> {
      calls.push_back(Joined(argv));
      auto& q = answers[argv[0]];
      if (q.empty()) return CommandResult{0, "", "", false};
      CommandResult r = q.front();
      if (q.size() > 1) q.pop_front();
      return r;
    };
  }
  int Count(const std::string& prefix) const {
    int n = 0;
    for (const auto& c : calls) n += c.rfind(prefix, 0) == 0 ? 1 : 0;
    return n;
  }
};

SlurmOptions Opts(const std::string& dir) {
  SlurmOptions o;
  o.script_dir = dir;
  o.tag = "abc";
  o.poll_s = 0;
  o.release_grace_s = 0;
  return o;
}

TEST(SlurmBackend, AGangIsOneSbatchAndItsPendingReasonIsSlurms) {
  testing::TempDir t;
  FakeSlurm f;
  f.answers["sbatch"] = {{0, "41\n", "", false}};
  auto b = MakeSlurmBackendWith(Opts(t.path()), 2, f.Runner());
  ASSERT_TRUE(b->Obtain(Gang("j1", 2)).ok());
  EXPECT_EQ(f.Count("sbatch --parsable"), 1);
  EXPECT_TRUE(Env::Default().Exists(t.File("anneal-j1-a0.sh")));
  f.answers["squeue"] = {{0, "41|PENDING|Resources|anneal:abc:j1-a0-n0,j1-a0-n1\n", "", false}};
  ProvisionReport r = b->Poll();
  EXPECT_EQ(r.pending.size(), 2u);
  EXPECT_EQ(r.pending["j1-a0-n1"], "Slurm job 41 pending: Resources");
  EXPECT_TRUE(r.gone.empty());
  f.answers["squeue"] = {{0, "41|RUNNING|None|anneal:abc:j1-a0-n0,j1-a0-n1\n", "", false}};
  r = b->Poll();
  EXPECT_TRUE(r.pending.empty());
  EXPECT_TRUE(r.gone.empty());
}

TEST(SlurmBackend, AnAllocationGoneFromTheQueueTakesItsInstancesWith) {
  testing::TempDir t;
  FakeSlurm f;
  f.answers["sbatch"] = {{0, "41\n", "", false}};
  f.answers["scontrol"] = {{0, "JobId=41 JobState=NODE_FAIL Reason=None\n", "", false}};
  auto b = MakeSlurmBackendWith(Opts(t.path()), 2, f.Runner());
  ASSERT_TRUE(b->Obtain(Gang("j1", 2)).ok());
  f.answers["squeue"] = {{0, "", "", false}};
  const ProvisionReport r = b->Poll();
  EXPECT_EQ(r.gone, (std::vector<std::string>{"j1-a0-n0", "j1-a0-n1"}));
  EXPECT_EQ(f.Count("scontrol -o show job 41"), 1);
  EXPECT_TRUE(b->Poll().gone.empty());  // reported once
}

TEST(SlurmBackend, ASqueueThatFailsLosesNothing) {
  testing::TempDir t;
  FakeSlurm f;
  f.answers["sbatch"] = {{0, "41\n", "", false}};
  auto b = MakeSlurmBackendWith(Opts(t.path()), 2, f.Runner());
  ASSERT_TRUE(b->Obtain(Gang("j1", 1)).ok());
  f.answers["squeue"] = {{1, "", "slurm_load_jobs error: Socket timed out", false}};
  EXPECT_TRUE(b->Poll().gone.empty());  // a busy controller is not a lost allocation
}

TEST(SlurmBackend, AReleasedGangIsCancelledAfterItsGraceAndARestartedServerFindsItsGangs) {
  testing::TempDir t;
  FakeSlurm f;
  f.answers["sbatch"] = {{0, "41\n", "", false}};
  f.answers["squeue"] = {{0, "41|RUNNING|None|anneal:abc:j1-a0-n0,j1-a0-n1\n", "", false}};
  auto b = MakeSlurmBackendWith(Opts(t.path()), 2, f.Runner());
  ASSERT_TRUE(b->Obtain(Gang("j1", 2)).ok());
  b->Release("j1-a0-n0");
  (void)b->Poll();
  EXPECT_EQ(f.Count("scancel"), 0);  // one instance still in use
  b->Release("j1-a0-n1");
  (void)b->Poll();
  EXPECT_EQ(f.Count("scancel 41"), 1);
  // A new server (no memory of job 41) finds it in squeue and reports it once it ends.
  auto again = MakeSlurmBackendWith(Opts(t.path()), 2, f.Runner());
  EXPECT_TRUE(again->Poll().gone.empty());
  f.answers["squeue"] = {{0, "", "", false}};
  EXPECT_EQ(again->Poll().gone.size(), 2u);
}

TEST(SlurmBackend, SbatchRefusingAGangIsAPeerErrorWithSlurmsWords) {
  testing::TempDir t;
  FakeSlurm f;
  f.answers["sbatch"] = {{1, "", "sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified\n", false}};
  auto b = MakeSlurmBackendWith(Opts(t.path()), 2, f.Runner());
  const Status st = b->Obtain(Gang("j1", 2));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kPeer);
  EXPECT_TRUE(Has(st.message(), "Invalid account")) << st.message();
}

TEST(SlurmBackend, StartChecksNameTheFix) {
  testing::TempDir t;
  SlurmOptions o = Opts(t.path());
  o.agent_binary = "/opt/anneal";
  auto missing = [](const std::vector<std::string>& a) -> Result<CommandResult> {
    return PeerError("cannot run " + a[0] + ": No such file or directory");
  };
  auto r = MakeSlurmBackend(o, missing);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Has(r.status().message(), "sbatch is not on the server's PATH")) << r.status().message();

  FakeSlurm down;
  down.answers["sinfo"] = {{1, "", "slurm_load_partitions: Unable to contact slurm controller (connect failure)\n", false}};
  r = MakeSlurmBackend(o, down.Runner());
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Has(r.status().message(), "no Slurm controller answered")) << r.status().message();

  FakeSlurm up;
  up.answers["sinfo"] = {{0, "debug*|2\n", "", false}};
  o.partition = "gpu";
  r = MakeSlurmBackend(o, up.Runner());
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Has(r.status().message(), "no partition 'gpu'")) << r.status().message();

  o.partition = "";
  up.answers["srun"] = {{2, "", "slurmstepd: error: execve(): /opt/anneal: No such file or directory\n", false}};
  r = MakeSlurmBackend(o, up.Runner());
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Has(r.status().message(), "--slurm-agent-binary")) << r.status().message();

  up.answers["srun"] = {{1, "", "srun: error: Unable to allocate resources: Requested node configuration is not available\n", false}};
  r = MakeSlurmBackend(o, up.Runner());
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Has(r.status().message(), "Requested node configuration is not available")) << r.status().message();

  up.answers["srun"] = {{1, "", "srun: job 8 queued and waiting for resources\nsrun: error: Unable to allocate resources: Requested nodes are busy\n", false}};
  r = MakeSlurmBackend(o, up.Runner());
  ASSERT_TRUE(r.ok());  // a busy cluster only warns
  EXPECT_EQ((*r)->capacity(), 2);
  EXPECT_TRUE(Has((*r)->CapacityHint(), "has 2 node(s)"));
}

TEST(SlurmInstanceTypes, TheOperatorsFileIsReadAndEveryMistakeNamed) {
  testing::TempDir t;
  auto types = ReadSlurmInstanceTypes(
      t.Write("ok.yaml", "h100x8: {partition: gpu, gpus_per_node: 8, cpus_per_task: 96, mem: 1500G, constraint: h100}\ncpu: {cpus_per_task: 4}\n"));
  ASSERT_TRUE(types.ok()) << types.status().message();
  EXPECT_EQ(types->at("h100x8").partition, "gpu");
  EXPECT_EQ(types->at("h100x8").gpus_per_node, 8);
  EXPECT_EQ(types->at("h100x8").mem, "1500G");
  EXPECT_EQ(types->at("cpu").cpus_per_task, 4);
  auto bad = ReadSlurmInstanceTypes(t.Write("bad.yaml", "gpu: {gpus: 8}\n"));
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(Has(bad.status().message(), "unknown option gpu.gpus")) << bad.status().message();
  bad = ReadSlurmInstanceTypes(t.Write("type.yaml", "gpu: {gpus_per_node: eight}\n"));
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(Has(bad.status().message(), "gpu.gpus_per_node has the wrong type")) << bad.status().message();
  bad = ReadSlurmInstanceTypes(t.Write("shape.yaml", "- gpu\n"));
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(Has(bad.status().message(), "must map each instance type")) << bad.status().message();
}

}  // namespace
}  // namespace anneal
