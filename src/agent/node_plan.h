// What one node does for a job assignment, decided as data before anything is touched (issue 35):
// the job's folders, what to download (the source package, the channels), the ranks' environment as
// far as it is known before the downloads and the meeting, the folders outside the job's that its
// ranks write, the checkpoint sync, resourceconfig.json, and the launcher's options. PlanNode is pure
// (no file, network, clock or environment access: the node's facts come in NodeFacts), so it is
// tested as data (tests/agent/node_plan_test.cc); agent/agent.cc's JobRunner carries the plan out in
// small effectful steps (fetch, channels, folders, meet, sandbox, launch, report).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "protocol/wire.h"
#include "core/status.h"
#include "launch/launcher.h"

namespace anneal {

// The node's side of the plan: what the agent knows of itself.
struct NodeFacts {
  std::string work_dir;     // the agent's work root (jobs live in work_dir/jobs/<job>)
  std::string instance_id;  // ANNEAL_INSTANCE_ID
  std::string address;      // this node's address (the master's when it is node 0)
  std::string self;         // the anneal executable; its folder goes first on the ranks' PATH
  std::string path;         // the agent's PATH ("" -> /usr/bin:/bin)
  std::string slurm_job;    // SLURM_JOB_ID ("" off Slurm)
  std::string slurm_node;   // SLURMD_NODENAME
};

// A data channel to make ready (spec.channels, not fastfile: those are read in place).
struct ChannelFetch {
  std::string name, mode, uri;
  std::string local_dir;  // where it is downloaded or mounted
  std::string var;        // ANNEAL_CHANNEL_<NAME>: set to the ready path
};

// A folder outside the job's own that its ranks write, and the spec field that named it.
struct WritableFolder {
  std::string path, field;
};

struct NodePlan {
  std::string jobdir, code_dir;
  std::string source_sha;    // "": no source package
  std::string package_path;  // where the downloaded package is kept
  std::vector<ChannelFetch> channels;
  std::vector<std::string> in_place;  // fastfile channels' URIs (the fetched channels' paths join them)
  // The ranks' environment before the channels are ready and the nodes have met: the spec's
  // environment and secrets, the role's credentials, each channel's _MODE and _URI (and a fastfile
  // channel's path), the checkpoint, output, model and progress folders, the instance, PATH.
  std::map<std::string, std::string> env;
  std::vector<std::string> secret_values;      // masked in every line shipped
  std::map<std::string, std::string> storage;  // credentials for this job's own storage calls
  std::string ckpt_local;
  bool ckpt_in_job = true;  // ckpt_local lies inside the job's folder
  std::vector<WritableFolder> writable;
  std::string ckpt_sync_uri;  // not "": the agent restores ckpt_local from it and syncs it back
  std::string output_dir, model_dir, progress_dir, output_uri;
  std::string resource_config_path;
  nlohmann::json resource_config;
  bool meet = false;  // several nodes: meet through the server before launching
  // The launcher's options but for what the meeting, the sandbox and the runner add (ports, exec
  // key, wrap, the command, the environment, the callbacks, stop and kill).
  LaunchOptions launch;
};

// The plan for assignment a on this node. InvalidInput for a spec the node cannot run as given (an
// unknown launcher).
Result<NodePlan> PlanNode(const Assignment& a, const NodeFacts& facts);

// "${NAME}" -> env[NAME], else the agent's own environment variable NAME; other text as it is.
std::string ExpandVars(const std::string& s, const std::map<std::string, std::string>& env);

// Whether path is folder or inside it (both absolute, normalised).
bool IsUnder(const std::string& path, const std::string& folder);

}  // namespace anneal
