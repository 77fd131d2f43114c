// The server's backend, from its options (--backend local | static | slurm), each with what it needs:
// the local agents' join token and CA, the Slurm cluster's checks and instance-type options.
#pragma once

#include <memory>

#include "provision/instance_provider.h"
#include "control/server_options.h"

namespace anneal {

Result<std::unique_ptr<InstanceProvider>> MakeServerBackend(const ServerOptions& o);

// The local and Slurm agents' working areas (their jobs' folders, the agents' logs): --work-root,
// else the data folder's sibling "<DATA_DIR>-work" — never inside the data folder, which every agent
// hides from its jobs.
std::string WorkRoot(const ServerOptions& o);

// --slurm-instance-types FILE: YAML, instance type -> {partition, gpus_per_node, cpus_per_task, mem,
// constraint}; an unknown key or a wrong type is an error naming it.
Result<std::map<std::string, SlurmTypeOptions>> ReadSlurmInstanceTypes(const std::string& path);

}  // namespace anneal
