// anneal launch: start and supervise this node's ranks of a job (launch/launcher.h has the contract).
#include <csignal>
#include <cstdio>

#include <chrono>
#include <cstdlib>

#include "cli/commands.h"
#include "comm/rank_contract.h"
#include "comm/store.h"
#include "launch/launcher.h"
#include "launch/rank_shim.h"
#include "launch/sandbox.h"
#include "launch/remote_exec.h"

namespace anneal::cli {

namespace {

Status RunLaunch(const LaunchOptions& o) {
  auto r = RunLauncher(o, [](const std::string& line) {
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
  });
  if (!r.ok()) return r.status();
  if (r->exit_code == 0) return Status::Ok();
  if (r->interrupted) {
    // Stopped on request (Ctrl-C, a scheduler's SIGTERM): 128 + that signal, with the ranks' own word
    // on where they stopped.
    const int sig = r->signal ? r->signal : SIGTERM;
    return Interrupted(sig, "by " + SignalName(sig) + " after " + std::to_string(r->attempts) +
                                " attempt(s); ranks were sent SIGTERM" + (r->last_words.empty() ? "" : "; " + r->last_words));
  }
  const std::string m = "the job failed after " + std::to_string(r->attempts) + " attempt(s):\n" + r->summary;
  if (r->exit_code == 2) return InvalidInput(m + "fix the input the failing rank named, then launch again");
  if (r->exit_code == 3) return PeerError(m + "a rank or the network was lost: see the ranks' errors above");
  return Internal(m + "see the failing rank's error above");
}

// mpirun's rsh agent: HOST then the command line mpirun wants run there (launch/remote_exec.h).
Status RunLaunchRsh(const std::vector<std::string>& args) {
  if (args.size() < 2) return InvalidInput("launch-rsh needs HOST and a command: mpirun runs it as plm_rsh_agent");
  // The attempt's part of the rank contract (mpirun's environment, which the leader was given).
  ANNEAL_ASSIGN_OR_RETURN(const RankContract attempt, RankContract::FromEnvironment());
  const char* launch_key = std::getenv("ANNEAL_LAUNCH_KEY");
  if (attempt.store.empty() || attempt.job.empty() || !launch_key || !*launch_key) {
    return InvalidInput("launch-rsh: ANNEAL_STORE, ANNEAL_JOB and ANNEAL_LAUNCH_KEY are not all set: it runs only "
                        "under mpirun started by anneal (entrypoint.launcher: mpirun)");
  }
  std::string command;
  for (size_t i = 1; i < args.size(); ++i) command += (i > 1 ? " " : "") + args[i];
  ANNEAL_ASSIGN_OR_RETURN(auto store, OpenStore(attempt.store, std::chrono::seconds(30)));
  const std::string prefix = LaunchKey(attempt.job, attempt.attempt, "rsh/" + args[0] + "/");
  ANNEAL_ASSIGN_OR_RETURN(int code, RemoteExec(store.get(), prefix, args[0], launch_key, command));
  std::exit(code);
}

void AddLaunchHelpers(CLI::App& app, RunFn* run) {
  auto ppn = std::make_shared<int>(1);
  auto cmd = std::make_shared<std::vector<std::string>>();
  CLI::App* r = app.add_subcommand(
      "launch-rank",
      "Run as each rank of a job whose entrypoint.launcher is mpirun or srun: set the rank contract (RANK, "
      "WORLD_SIZE, LOCAL_RANK, ...) and the node's prepared environment, then exec the program. Started by anneal, "
      "not by hand.");
  r->add_option("--procs-per-node", *ppn, "Ranks per node (resources.procs_per_instance)")->capture_default_str();
  r->add_option("command", *cmd, "The program, after --")->required();
  r->callback([run, ppn, cmd] { *run = [ppn, cmd] { return ExecRank(*ppn, *cmd); }; });
  auto plan = std::make_shared<std::string>();
  auto scmd = std::make_shared<std::vector<std::string>>();
  CLI::App* x = app.add_subcommand(
      "sandbox-exec",
      "Run COMMAND inside a job's sandbox (its cgroup, its mount namespace, its uid, NoNewPrivs: docs/security.md), as "
      "the plan file the agent wrote says. Started by the agent and the launcher for every process of a job, not by hand.");
  x->add_option("--plan", *plan, "The plan file (root's, mode 0600)")->required();
  auto enter = std::make_shared<bool>(false);
  x->add_flag("--enter", *enter,
              "With a plan that names an image: run COMMAND in the node's running container (anneal exec) instead of a new one");
  x->add_option("command", *scmd, "The program, after --")->required();
  x->callback([run, plan, scmd, enter] { *run = [plan, scmd, enter] { return ExecInSandbox(*plan, *scmd, *enter); }; });
  // mpirun's helpers: every argument after the name is passed on as it is.
  auto pass_through = [&app, run](const char* name, const char* help, Status (*fn)(const std::vector<std::string>&)) {
    CLI::App* c = app.add_subcommand(name, help);
    c->prefix_command();
    c->callback([run, c, fn] {
      auto args = std::make_shared<std::vector<std::string>>(c->remaining());
      *run = [args, fn] { return fn(*args); };
    });
  };
  pass_through("launch-daemon",
               "Open MPI's daemon (orted) of an mpirun job on a Slurm node, entered into the node's job sandbox first: "
               "ORTED_ARGS... are orted's. Started by mpirun (orte_launch_agent), not by hand.",
               ExecDaemon);
  pass_through("launch-rsh",
               "mpirun's remote-shell agent in an anneal job off Slurm: HOST COMMAND... runs COMMAND on HOST through that "
               "node's anneal launcher (never sshd). Started by mpirun, not by hand.",
               RunLaunchRsh);
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
  AddLaunchHelpers(app, run);
}

}  // namespace anneal::cli
