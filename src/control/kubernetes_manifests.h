// `anneal kubernetes render JOB.yaml`: the manifests a Kubernetes cluster would run for a job — pods
// that run `anneal agent` and join an anneal server started with `--backend static`, which then
// assigns them the job like any joined agents. No API server is contacted (none can run here): the
// manifests are validated offline against the official schemas (tests/peers/kubernetes_test.sh).
//
//   - a headless Service (clusterIP None) selecting the job's pods, which are its subdomain: each pod
//     has a stable DNS name;
//   - an Indexed Job of instance_count pods (completions = parallelism = instance_count, backoffLimit
//     0: anneal's retry policy owns restarts), each pod one instance: `anneal agent` with the spec's
//     instance type and procs_per_instance slots, the pod's name as instance id and its IP as address
//     (downward API), an emptyDir work folder;
//   - the join token mounted from a Secret the operator creates (`kubectl create secret generic NAME
//     --from-file=token=DATA_DIR/join.token`), read as a file: never in the pod's environment;
//   - resource requests (and limits) from the operator's instance types file, else one CPU per rank.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "protocol/job_definition.h"

namespace anneal {

struct KubernetesResources {
  std::string cpu, memory;  // Kubernetes quantities ("8", "32Gi"); "" = none
  int gpus = 0;             // nvidia.com/gpu
};

struct KubernetesOptions {
  std::string server_url;  // where the agents join (required)
  std::string image = "anneal:latest";
  std::string namespace_ = "default";
  std::string join_token_secret = "anneal-join-token";  // a Secret with the key "token"
  std::map<std::string, KubernetesResources> types;     // per instance type
};

// The manifests in apply order (Service, Job). InvalidInput naming the option when one is missing.
Result<std::vector<nlohmann::json>> KubernetesManifests(const JobSpec& spec, const KubernetesOptions& o);

// YAML documents separated by "---", as kubectl apply -f reads them.
std::string ManifestsYaml(const std::vector<nlohmann::json>& docs);

// --instance-types FILE: instance type -> {cpu, memory, gpus}; an unknown key is an error naming it.
Result<std::map<std::string, KubernetesResources>> ReadKubernetesInstanceTypes(const std::string& path);

}  // namespace anneal
