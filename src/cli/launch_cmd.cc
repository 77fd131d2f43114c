// anneal launch: start and supervise this node's ranks of a job (launch/launcher.h has the contract).
#include <cstdio>

#include "cli/commands.h"
#include "launch/launcher.h"

namespace anneal::cli {

namespace {

Status RunLaunch(const LaunchOptions& o) {
  auto r = RunLauncher(o, [](const std::string& line) {
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
  });
  if (!r.ok()) return r.status();
  if (r->exit_code == 0) return Status::Ok();
  const std::string m = "the job failed after " + std::to_string(r->attempts) + " attempt(s):\n" + r->summary;
  if (r->exit_code == 2) return InvalidInput(m + "fix the input the failing rank named, then launch again");
  if (r->exit_code == 3) return PeerError(m + "a rank or the network was lost: see the ranks' errors above");
  return Internal(m + "see the failing rank's error above");
}

}  // namespace

void AddLaunchCommand(CLI::App& app, RunFn* run) {
  auto o = std::make_shared<LaunchOptions>();
  CLI::App* c = app.add_subcommand(
      "launch",
      "Start and supervise this node's ranks of a job (torchrun-compatible environment); restart the whole group "
      "on a failure.\nExample: anneal launch --nproc-per-node 2 -- anneal train --config examples/kjv_tiny.yaml");
  c->add_option("--nproc-per-node", o->nproc_per_node, "Ranks on this node")->capture_default_str();
  c->add_option("--nnodes", o->nnodes, "Nodes in the job (one launcher runs on each)")->capture_default_str();
  c->add_option("--node-rank", o->node_rank, "This node's index, 0 .. nnodes-1 (node 0 serves the store)")
      ->capture_default_str();
  c->add_option("--master-addr", o->master_addr, "Address of node 0, reachable from every node")->capture_default_str();
  c->add_option("--master-port", o->master_port, "MASTER_PORT handed to the ranks (left free for their own use)")
      ->capture_default_str();
  c->add_option("--store-port", o->store_port,
                "Port of the rendezvous store on node 0 (default: master-port + 1 with several nodes, a free port with "
                "one)");
  c->add_option("--store-bind", o->store_bind,
                "Address node 0's store listens on (default: --master-addr with several nodes, 127.0.0.1 with one)");
  c->add_option("--max-restarts", o->max_restarts, "Restarts of the whole group after a failure")->capture_default_str();
  c->add_option("--job", o->job, "Job name (ANNEAL_JOB; store keys are under it)")->capture_default_str();
  c->add_option("--grace-s", o->grace_s, "After a failure, seconds the other ranks get before SIGKILL")
      ->capture_default_str();
  c->add_option("--rendezvous-timeout-s", o->rendezvous_timeout_s,
                "How long launchers wait for each other and for the store")
      ->capture_default_str();
  c->add_option("--cpu-bind", o->cpu_bind,
                "auto: pin each local rank to its share of the CPUs when there is at least one each; none: do not pin")
      ->capture_default_str();
  c->add_option("command", o->command, "The rank's command, after --")->required();
  c->callback([run, o] { *run = [o] { return RunLaunch(*o); }; });
}

}  // namespace anneal::cli
