#include "control/server_backend.h"

#include <climits>
#include <cstdlib>

#include "provision/slurm_backend.h"
#include "control/auth.h"
#include "core/crypto.h"
#include "control/type_options.h"
#include "core/env.h"

namespace anneal {

namespace {

bool Tls(const ServerOptions& o) { return !o.tls_cert.empty() || !o.tls_key.empty(); }
std::string Absolute(const std::string& p) {
  char buf[PATH_MAX];
  return ::realpath(p.c_str(), buf) ? std::string(buf) : p;
}

}  // namespace

std::string WorkRoot(const ServerOptions& o) {
  if (!o.work_root.empty()) return Absolute(o.work_root);
  std::string data = Absolute(o.data_dir);
  while (data.size() > 1 && data.back() == '/') data.pop_back();
  return data + "-work";
}

namespace {

Result<std::unique_ptr<InstanceProvider>> MakeLocal(const ServerOptions& o) {
  LocalBackendOptions lo;
  // No join token: each agent gets its instance's one-time secret (InstanceRequest::secret).
  if (Tls(o)) lo.env["ANNEAL_CA_CERT"] = o.tls_ca.empty() ? o.tls_cert : o.tls_ca;
  lo.agent_binary = o.agent_binary;
  // Outside the data folder (the store, admin.token), which every agent hides from its jobs.
  lo.work_root = WorkRoot(o);
  lo.hide = {Absolute(o.data_dir), lo.work_root};
  lo.no_sandbox = o.no_sandbox;
  lo.max_instances = o.max_instances;
  lo.heartbeat_s = o.heartbeat_s;
  lo.orphan_timeout_s = o.local_orphan_timeout_s;
  return MakeLocalBackend(lo);
}

Result<std::unique_ptr<InstanceProvider>> MakeSlurm(const ServerOptions& o) {
  SlurmOptions so = o.slurm;
  if (!o.slurm_instance_types_file.empty()) {
    ANNEAL_ASSIGN_OR_RETURN(so.types, ReadSlurmInstanceTypes(o.slurm_instance_types_file));
  }
  const std::string data = Absolute(o.data_dir);
  if (so.agent_binary.empty()) so.agent_binary = o.agent_binary.empty() ? SelfExecutable() : o.agent_binary;
  if (so.work_root.empty()) so.work_root = WorkRoot(o);
  so.hide = {data, so.work_root};
  so.no_sandbox = o.no_sandbox;
  so.script_dir = JoinPath(data, "slurm");
  if (Tls(o)) so.ca_file = Absolute(o.tls_ca.empty() ? o.tls_cert : o.tls_ca);
  so.tag = Sha256Hex(data).substr(0, 12);  // this server's jobs among the cluster's
  so.heartbeat_s = o.heartbeat_s;
  return MakeSlurmBackend(so, SlurmCommands());
}

}  // namespace

Result<std::unique_ptr<InstanceProvider>> MakeServerBackend(const ServerOptions& o) {
  if (o.backend == kJoinedBackend) return MakeStaticBackend();
  if (o.backend == "local") return MakeLocal(o);
  if (o.backend == "slurm") return MakeSlurm(o);
  return InvalidInput("--backend '" + o.backend + "' must be local, static or slurm");
}

Result<std::map<std::string, SlurmTypeOptions>> ReadSlurmInstanceTypes(const std::string& path) {
  std::map<std::string, SlurmTypeOptions> out;
  Status st = ReadTypeOptions("--slurm-instance-types", path, "its sbatch options",
                              [&out](const std::string& type, const std::string& key, const YAML::Node& v) {
    SlurmTypeOptions& t = out[type];
    if (key == "partition") t.partition = v.as<std::string>();
    else if (key == "constraint") t.constraint = v.as<std::string>();
    else if (key == "mem") t.mem = v.as<std::string>();
    else if (key == "gpus_per_node") t.gpus_per_node = v.as<int>();
    else if (key == "cpus_per_task") t.cpus_per_task = v.as<int>();
    else return InvalidInput("unknown option " + type + "." + key + " (partition, gpus_per_node, cpus_per_task, mem, constraint)");
    if (t.gpus_per_node < 0 || t.cpus_per_task < 0) return InvalidInput(type + "." + key + " must not be negative");
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

}  // namespace anneal
