#include "control/kubernetes_manifests.h"

#include <yaml-cpp/yaml.h>

#include "control/type_options.h"

namespace anneal {

namespace {

using nlohmann::json;

json Resources(const JobSpec& spec, const KubernetesOptions& o) {
  KubernetesResources r;
  const auto t = o.types.find(spec.instance_type);
  if (t != o.types.end()) r = t->second;
  else r.cpu = std::to_string(spec.procs_per_instance);  // one CPU per rank
  json q = json::object();
  if (!r.cpu.empty()) q["cpu"] = r.cpu;
  if (!r.memory.empty()) q["memory"] = r.memory;
  if (r.gpus > 0) q["nvidia.com/gpu"] = std::to_string(r.gpus);
  json res = {{"requests", q}};
  if (r.gpus > 0) res["limits"] = {{"nvidia.com/gpu", std::to_string(r.gpus)}};  // GPUs: limits = requests
  return res;
}

json FieldEnv(const std::string& name, const std::string& path) {
  return {{"name", name}, {"valueFrom", {{"fieldRef", {{"fieldPath", path}}}}}};
}

json AgentContainer(const JobSpec& spec, const KubernetesOptions& o) {
  return {
      {"name", "anneal-agent"},
      {"image", o.image},
      {"command", {"anneal", "agent"}},
      {"args",
       {"--server", o.server_url, "--instance-id", "$(POD_NAME)", "--address", "$(POD_IP)", "--instance-type",
        spec.instance_type, "--slots", std::to_string(spec.procs_per_instance), "--work-dir", "/var/lib/anneal/work",
        "--join-token-file", "/var/run/anneal/join/token", "--remove-work-dir"}},
      {"env", {FieldEnv("POD_NAME", "metadata.name"), FieldEnv("POD_IP", "status.podIP")}},
      {"resources", Resources(spec, o)},
      {"volumeMounts",
       {{{"name", "join-token"}, {"mountPath", "/var/run/anneal/join"}, {"readOnly", true}},
        {{"name", "work"}, {"mountPath", "/var/lib/anneal/work"}}}},
  };
}

json IndexedJob(const JobSpec& spec, const KubernetesOptions& o, const std::string& name, const json& labels) {
  json pod = {
      {"metadata", {{"labels", labels}}},
      {"spec",
       {{"restartPolicy", "Never"},
        {"subdomain", name},  // the headless Service: a stable DNS name per pod
        {"containers", {AgentContainer(spec, o)}},
        {"volumes",
         {{{"name", "join-token"}, {"secret", {{"secretName", o.join_token_secret}, {"defaultMode", 0400}}}},
          {{"name", "work"}, {"emptyDir", json::object()}}}}}},
  };
  return {
      {"apiVersion", "batch/v1"},
      {"kind", "Job"},
      {"metadata", {{"name", name}, {"namespace", o.namespace_}, {"labels", labels}}},
      {"spec",
       {{"completionMode", "Indexed"},
        {"completions", spec.instance_count},
        {"parallelism", spec.instance_count},
        {"backoffLimit", 0},  // anneal's retry policy owns restarts
        {"template", pod}}},
  };
}

}  // namespace

Result<std::vector<json>> KubernetesManifests(const JobSpec& spec, const KubernetesOptions& o) {
  if (o.server_url.empty()) return InvalidInput("--server: the URL the pods' agents join (an anneal server with --backend static)");
  if (o.image.empty()) return InvalidInput("--image: the container image with anneal on PATH");
  const std::string name = "anneal-" + spec.name;  // the spec's name is already a DNS label
  const json labels = {{"app.kubernetes.io/name", "anneal"}, {"anneal.dev/job", spec.name}};
  json service = {
      {"apiVersion", "v1"},
      {"kind", "Service"},
      {"metadata", {{"name", name}, {"namespace", o.namespace_}, {"labels", labels}}},
      {"spec", {{"clusterIP", "None"}, {"selector", labels}, {"publishNotReadyAddresses", true}}},
  };
  return std::vector<json>{service, IndexedJob(spec, o, name, labels)};
}

namespace {

void Emit(YAML::Emitter& e, const json& v) {
  if (v.is_object()) {
    e << YAML::BeginMap;
    for (auto it = v.begin(); it != v.end(); ++it) {
      e << YAML::Key << it.key() << YAML::Value;
      Emit(e, it.value());
    }
    e << YAML::EndMap;
  } else if (v.is_array()) {
    e << YAML::BeginSeq;
    for (const auto& x : v) Emit(e, x);
    e << YAML::EndSeq;
  } else if (v.is_string()) {
    e << YAML::DoubleQuoted << v.get<std::string>();  // "8" stays a string, "$(POD_NAME)" stays intact
  } else if (v.is_boolean()) {
    e << v.get<bool>();
  } else if (v.is_number_integer()) {
    e << v.get<int64_t>();
  } else if (v.is_number()) {
    e << v.get<double>();
  } else {
    e << YAML::Null;
  }
}

}  // namespace

std::string ManifestsYaml(const std::vector<json>& docs) {
  std::string out;
  for (const auto& d : docs) {
    YAML::Emitter e;
    Emit(e, d);
    out += "---\n" + std::string(e.c_str()) + "\n";
  }
  return out;
}

Result<std::map<std::string, KubernetesResources>> ReadKubernetesInstanceTypes(const std::string& path) {
  std::map<std::string, KubernetesResources> out;
  Status st = ReadTypeOptions("--instance-types", path, "{cpu, memory, gpus}",
                              [&out](const std::string& type, const std::string& key, const YAML::Node& v) {
    KubernetesResources& r = out[type];
    if (key == "cpu") r.cpu = v.as<std::string>();
    else if (key == "memory") r.memory = v.as<std::string>();
    else if (key == "gpus") r.gpus = v.as<int>();
    else return InvalidInput("unknown key " + type + "." + key + " (cpu, memory, gpus)");
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

}  // namespace anneal
