// anneal kubernetes render: the manifests a Kubernetes cluster would run for a job
// (control/kubernetes_manifests.h). Nothing is sent to a cluster: apply them with kubectl.
#include <cstdio>

#include "cli/commands.h"
#include "control/kubernetes_manifests.h"
#include "core/env.h"

namespace anneal::cli {

namespace {

struct RenderArgs {
  std::string spec_file, out, format = "yaml", types_file;
  KubernetesOptions o;
};

Status Render(const RenderArgs& a) {
  ANNEAL_ASSIGN_OR_RETURN(std::string text, Env::Default().ReadFile(a.spec_file));
  auto spec = ParseJobSpec(text);
  if (!spec.ok()) return spec.status().Annotate(a.spec_file);
  KubernetesOptions o = a.o;
  if (!a.types_file.empty()) {
    ANNEAL_ASSIGN_OR_RETURN(o.types, ReadKubernetesInstanceTypes(a.types_file));
  }
  ANNEAL_ASSIGN_OR_RETURN(auto docs, KubernetesManifests(*spec, o));
  std::string body;
  if (a.format == "json") {
    body = nlohmann::json(docs).dump(2) + "\n";
  } else if (a.format == "yaml") {
    body = ManifestsYaml(docs);
  } else {
    return InvalidInput("--format '" + a.format + "' must be yaml or json");
  }
  if (a.out.empty() || a.out == "-") {
    std::fwrite(body.data(), 1, body.size(), stdout);
    return Status::Ok();
  }
  return Env::Default().WriteFileAtomic(a.out, body);
}

}  // namespace

void AddKubernetesCommand(CLI::App& app, RunFn* run) {
  CLI::App* k = app.add_subcommand("kubernetes", "Kubernetes: write the manifests a cluster would run for a job");
  k->require_subcommand(1);
  auto a = std::make_shared<RenderArgs>();
  CLI::App* r = k->add_subcommand(
      "render",
      "Write a job's manifests (a headless Service and an Indexed Job whose pods run `anneal agent` and join a server\n"
      "started with --backend static); the join token comes from a Secret the operator creates:\n"
      "  kubectl create secret generic anneal-join-token --from-file=token=DATA_DIR/join.token\n"
      "Example: anneal kubernetes render job.yaml --server http://anneal.ml.svc:8470 --image registry/anneal:0.1 | kubectl apply -f -");
  r->add_option("JOB", a->spec_file, "The job spec (YAML or JSON)")->required();
  r->add_option("--server", a->o.server_url, "The URL the agents join (an anneal server with --backend static)")->required();
  r->add_option("--image", a->o.image, "Container image with anneal on PATH")->capture_default_str();
  r->add_option("--namespace", a->o.namespace_, "Namespace of the manifests")->capture_default_str();
  r->add_option("--join-token-secret", a->o.join_token_secret, "Secret holding the join token under the key 'token'")
      ->capture_default_str();
  r->add_option("--instance-types", a->types_file, "YAML: instance type -> {cpu, memory, gpus} (default: one CPU per rank)");
  r->add_option("--format", a->format, "yaml (documents for kubectl apply -f) or json (an array)")->capture_default_str();
  r->add_option("-o,--output", a->out, "Write to this file instead of standard output");
  r->callback([run, a] { *run = [a] { return Render(*a); }; });
}

}  // namespace anneal::cli
