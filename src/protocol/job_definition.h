// JobSpec: what a user asks the control plane to run (DESIGN.md "A job spec"; docs/job-spec.md is the
// reference). Parsed from YAML or JSON, validated completely: an unknown field, a wrong type or a value
// out of range is InvalidInput whose message starts with the field's dotted path
// ("resources.instance_count: must be at least 1, got 0") and says what to write instead; the path is
// also returned separately so the API can put it in its 400 answer.
//
// The normalized form (ToJson) has every default filled in; the server stores that, agents receive it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace anneal {

struct ChannelSpec {
  std::string name;           // [A-Za-z0-9_]+; the ranks see ANNEAL_CHANNEL_<NAME upper-cased>
  std::string uri;            // s3://bucket/prefix, file:///dir or a path
  std::string mode = "file";  // file | fastfile | shared (data/channel.h)
};

struct MetricDefinition {
  std::string name;
  std::string regex;  // ECMAScript; the first capture group is the value
};

// stopping.rules[i] (docs/job-spec.md "Stopping rules"): watched by each instance's agent over what
// its ranks log (agent/stopping_rules.h); the first that holds ends the attempt, its name in the
// failure reason.
struct StoppingRule {
  std::string when;    // non_finite | no_improvement | gpu_utilization_below | no_output
  std::string metric;  // non_finite, no_improvement: a metric_definitions name (or step_time_s)
  int steps = 0;       // no_improvement: this many values of the metric in a row without a new best
  std::string mode = "min";  // no_improvement: min (lower is better) | max
  double percent = 0;  // gpu_utilization_below
  double for_s = 0;    // gpu_utilization_below, no_output: how long the condition must hold
  std::string action = "stop";  // stop (the job fails, never retried) | retry (an attempt failure, retried)
  // "no_improvement of val_loss in 5 steps (min)"
  std::string Describe() const;
};

struct JobSpec {
  std::string name;  // [a-z0-9][a-z0-9-]*, at most 48 characters
  // The execution role (control/execution_roles.h): which storage prefixes the job may use and the
  // credentials its ranks get. Required when the server defines roles.
  std::string role;
  // entrypoint: the ranks' command (argv; a single string runs under /bin/sh -c) and its
  // hyperparameters, appended as "--set k=v" for the built-in trainer and "--k v" otherwise.
  std::vector<std::string> command;
  bool shell = false;  // command was a string
  std::map<std::string, std::string> hyperparameters;
  // Who starts the ranks (launch/leader_command.h): "anneal" (each instance's agent starts its
  // procs_per_instance ranks), "mpirun" (Open MPI, from instance 0, across every instance) or "srun"
  // (Slurm, from instance 0, across the allocation; the slurm backend only).
  std::string launcher = "anneal";
  std::string source;  // a local folder (CLI side) or "package:<sha256>" (server side); "" = none
  std::vector<ChannelSpec> channels;
  std::string output_uri;
  std::string checkpoint_uri;
  std::string checkpoint_local_path;  // "" = a folder in the job's working area
  // Restore checkpoint_uri into the local folder before the ranks start and upload the folder to it
  // (for scripts that save to $ANNEAL_CHECKPOINT_DIR). false: the ranks use $ANNEAL_CHECKPOINT_URI
  // themselves (the built-in trainer can), and the agent copies nothing.
  bool checkpoint_sync = true;
  std::string instance_type = "local";
  int instance_count = 1;
  int procs_per_instance = 1;
  double keep_alive_s = 0;
  // Limits per instance, held by the job's cgroup (agent/job_cgroup.h); 0 = none. Over memory_mb the
  // job ends with exit cause out_of_memory; cpus is a CFS quota (2.5 = two and a half cores' time).
  int64_t memory_mb = 0;
  double cpus = 0;
  // Run the ranks in the job's sandbox (launch/sandbox.h, docs/security.md). false only from an
  // admin's token (the server refuses it from anyone else).
  bool sandbox = true;
  // A container image from the instances' local store (podman; launch/container.h): the ranks run in
  // it, with the sandbox's uid, folders, limits and devices. "" = on the host's tree.
  std::string image;
  double max_runtime_s = 0;    // 0 = no limit
  double max_pending_s = 0;    // 0 = no limit
  double grace_period_s = 30;  // SIGTERM .. SIGKILL on stop
  // Hang detection: no rank printed a line or advanced its step (ANNEAL_PROGRESS_DIR) for this long
  // is an infrastructure failure (the ranks are killed; retried while attempts remain). Before the
  // first line or step the allowance is hang_startup_s (loading, compiling, copying). 0 = off.
  double hang_timeout_s = 1800;
  double hang_startup_s = 3600;
  std::vector<StoppingRule> stopping_rules;
  int max_attempts = 1;
  std::vector<MetricDefinition> metric_definitions;
  std::map<std::string, std::string> environment;
  // Like environment, but the values never appear in describe, events or logs: the server shows
  // them as "***" and the agent replaces each value by "***" in every line a rank prints.
  std::map<std::string, std::string> secrets;

  nlohmann::json ToJson() const;
  // The argv the ranks run: command + hyperparameters (see above).
  std::vector<std::string> RankArgv() const;
};

// Parses YAML (a superset of JSON, so JSON texts work too). On failure returns the error and fills
// *error_field (when given) with the offending field's path.
Result<JobSpec> ParseJobSpec(const std::string& text, std::string* error_field = nullptr);
// From an already-parsed JSON document (what the API receives as application/json).
Result<JobSpec> JobSpecFromJson(const nlohmann::json& doc, std::string* error_field = nullptr);
// A spec this server stored (validated at its submit), read back on every job read: the same
// checks except compiling the metric regexes again, most of a read's cost (30 us of 41 for one).
Result<JobSpec> JobSpecFromStored(const nlohmann::json& doc);

}  // namespace anneal
