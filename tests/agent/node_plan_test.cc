// agent/node_plan.h as data: PlanNode decides a node's folders, downloads, environment, writable
// folders outside the job's, checkpoint sync, resourceconfig.json and launcher options from the
// assignment and the node's facts alone.
#include "agent/node_plan.h"

#include <gtest/gtest.h>

namespace anneal {
namespace {

Assignment Make(const std::string& yaml, int node, std::vector<std::string> addresses) {
  auto spec = ParseJobSpec(yaml);
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  Assignment a;
  a.job = "j-7";
  a.attempt = 3;
  a.node = node;
  a.addresses = std::move(addresses);
  a.spec = *spec;
  return a;
}

NodeFacts Facts() {
  NodeFacts f;
  f.work_dir = "/var/agent";
  f.instance_id = "i-1";
  f.address = "10.0.0.2";
  f.self = "/opt/anneal/bin/anneal";
  f.path = "/usr/bin";
  return f;
}

TEST(NodePlanTest, TwoNodesWithChannelsSecretsAndACheckpointSync) {
  Assignment a = Make(R"(
name: p
entrypoint: {command: [anneal, train], launcher: mpirun}
source: src
channels: [{name: train, uri: "s3://b/p", mode: fastfile}, {name: val, uri: /data/val}]
checkpoint: {uri: "s3://b/ck"}
resources: {instance_count: 2, procs_per_instance: 4}
environment: {FOO: bar}
secrets: {HF_TOKEN: hf_x}
)",
                      1, {"10.0.0.1", "10.0.0.2"});
  a.spec.source = "sha256:abc";
  a.credentials = {{"AWS_ACCESS_KEY_ID", "AK"}, {"AWS_SECRET_ACCESS_KEY", "SK"}};
  auto p = PlanNode(a, Facts());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->jobdir, "/var/agent/jobs/j-7");
  EXPECT_EQ(p->code_dir, "/var/agent/jobs/j-7/code");
  EXPECT_EQ(p->source_sha, "abc");
  EXPECT_EQ(p->package_path, "/var/agent/jobs/j-7/source.tar.gz");
  // the fastfile channel is read in place; the other is fetched into the job's folder
  ASSERT_EQ(p->channels.size(), 1u);
  EXPECT_EQ(p->channels[0].name, "val");
  EXPECT_EQ(p->channels[0].local_dir, "/var/agent/jobs/j-7/channels/val");
  EXPECT_EQ(p->channels[0].var, "ANNEAL_CHANNEL_VAL");
  EXPECT_EQ(p->in_place, std::vector<std::string>{"s3://b/p"});
  EXPECT_EQ(p->env.at("ANNEAL_CHANNEL_TRAIN"), "s3://b/p");
  EXPECT_EQ(p->env.at("ANNEAL_CHANNEL_VAL_MODE"), "file");
  EXPECT_EQ(p->env.count("ANNEAL_CHANNEL_VAL"), 0u);  // known once fetched
  EXPECT_EQ(p->env.at("FOO"), "bar");
  EXPECT_EQ(p->env.at("HF_TOKEN"), "hf_x");
  EXPECT_EQ(p->env.at("AWS_SECRET_ACCESS_KEY"), "SK");
  EXPECT_EQ(p->secret_values, (std::vector<std::string>{"hf_x", "SK"}));
  EXPECT_EQ(p->storage.size(), 2u);
  EXPECT_EQ(p->env.at("PATH"), "/opt/anneal/bin:/usr/bin");
  EXPECT_EQ(p->env.at("ANNEAL_PROGRESS_DIR"), "/var/agent/jobs/j-7/progress-3");
  EXPECT_EQ(p->env.at("ANNEAL_INSTANCE_ID"), "i-1");
  // the checkpoint: in the job's folder, synced with the URI by the agent
  EXPECT_EQ(p->ckpt_local, "/var/agent/jobs/j-7/checkpoints");
  EXPECT_TRUE(p->ckpt_in_job);
  EXPECT_EQ(p->ckpt_sync_uri, "s3://b/ck");
  EXPECT_TRUE(p->writable.empty());
  // two nodes: they meet; node 1 of 2, the launcher as the spec says
  EXPECT_TRUE(p->meet);
  EXPECT_EQ(p->launch.nnodes, 2);
  EXPECT_EQ(p->launch.node_rank, 1);
  EXPECT_EQ(p->launch.nproc_per_node, 4);
  EXPECT_EQ(p->launch.first_attempt, 3);
  EXPECT_EQ(p->launch.max_restarts, 0);
  EXPECT_EQ(p->launch.mode, LaunchMode::kMpirun);
  EXPECT_EQ(p->launch.self, "/opt/anneal/bin/anneal");
  EXPECT_EQ(p->resource_config["current_host"], "node-1");
  EXPECT_EQ(p->resource_config["hosts"], nlohmann::json({"node-0", "node-1"}));
  EXPECT_EQ(p->env.at("ANNEAL_RESOURCE_CONFIG"), "/var/agent/jobs/j-7/resourceconfig.json");
}

TEST(NodePlanTest, OneNodeWritingAFolderOutsideItsOwn) {
  Assignment a = Make(R"(
name: p
entrypoint: {command: [run]}
checkpoint: {uri: "file:///shared/ck", local_path: /scratch/ck, sync: false}
)",
                      0, {"10.0.0.2"});
  NodeFacts f = Facts();
  f.path = "";
  f.slurm_job = "42";
  f.slurm_node = "n3";
  auto p = PlanNode(a, f);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_FALSE(p->meet);
  EXPECT_EQ(p->launch.store_bind, "127.0.0.1");
  EXPECT_TRUE(p->source_sha.empty());
  EXPECT_FALSE(p->ckpt_in_job);
  ASSERT_EQ(p->writable.size(), 2u);
  EXPECT_EQ(p->writable[0].path, "/scratch/ck");
  EXPECT_EQ(p->writable[0].field, "checkpoint.local_path");
  EXPECT_EQ(p->writable[1].path, "/shared/ck");
  EXPECT_EQ(p->writable[1].field, "checkpoint.uri");
  EXPECT_TRUE(p->ckpt_sync_uri.empty());  // the ranks write it themselves
  EXPECT_EQ(p->env.at("PATH"), "/opt/anneal/bin:/usr/bin:/bin");
  EXPECT_TRUE(p->launch.under_slurm);
  EXPECT_EQ(p->launch.node_name, "n3");
}

TEST(NodePlanTest, ExpandsVariablesFromThePlanFirst) {
  EXPECT_EQ(ExpandVars("--data=${ANNEAL_CHANNEL_X}/a ${NOPE_NOT_SET_ANYWHERE} $X", {{"ANNEAL_CHANNEL_X", "/d"}}),
            "--data=/d/a ${NOPE_NOT_SET_ANYWHERE} $X");
  EXPECT_TRUE(IsUnder("/a/b", "/a"));
  EXPECT_TRUE(IsUnder("/a", "/a"));
  EXPECT_FALSE(IsUnder("/ab", "/a"));
}

}  // namespace
}  // namespace anneal
