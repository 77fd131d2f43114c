// anneal train: one rank of training from a YAML config (train/config.h lists every key).
// SIGTERM or SIGINT: finish the current step, save a checkpoint, exit 128 + the signal (143, 130), the
// code of a program ended by that signal, saying where it stopped. With train.checkpoint_dir
// unset, $ANNEAL_CHECKPOINT_URI (set by the agent from the job spec's checkpoint.uri) is used.
// --print-config prints the resolved config and exits; a run whose newest checkpoint is already at
// train.steps says there is nothing to do and exits 0 (train/trainer.cc, once the checkpoint has
// been checked against this run's model and lineage).
#include <csignal>
#include <cstdlib>
#include <cstdio>

#include "cli/commands.h"
#include "comm/rank_contract.h"
#include "train/trainer.h"

namespace anneal::cli {

namespace {

std::atomic<bool> g_stop{false};
std::atomic<int> g_stop_signal{0};
extern "C" void OnStopSignal(int sig) {
  g_stop_signal.store(sig);
  g_stop.store(true);
}

struct TrainArgs {
  std::string config;
  std::vector<std::string> sets;
  bool list_keys = false;
  bool print_config = false;
};

// Rank 0 commits a checkpoint once every rank's files are in its folder, so the ranks of several
// instances need one folder they all see. $ANNEAL_CHECKPOINT_DIR is each instance's own (the agent
// syncs it with checkpoint.uri): given to a job of several instances, no checkpoint could ever be
// committed and the run stalled at its second (found by the chaos soak). Refused at the start.
Status CheckSharedCheckpointDir(const std::string& dir) {
  const char* local = std::getenv("ANNEAL_CHECKPOINT_DIR");
  auto rank = RankContract::FromEnvironment();
  if (dir.empty() || !local || dir != local || !rank.ok() || rank->world <= rank->local_world) return Status::Ok();
  return InvalidInput("train.checkpoint_dir is $ANNEAL_CHECKPOINT_DIR (" + dir + "), a folder of this instance's own, but the job's " +
                      std::to_string(rank->world) + " ranks run on several instances, which must commit each checkpoint in one "
                      "folder they all see: leave train.checkpoint_dir unset (the trainer then writes to the job's "
                      "checkpoint.uri, $ANNEAL_CHECKPOINT_URI) or give a folder every instance shares");
}

Status RunTrain(const TrainArgs& a) {
  if (a.list_keys) {
    for (const auto& k : TrainConfig::Keys()) std::printf("%s\n", k.c_str());
    return Status::Ok();
  }
  if (a.config.empty()) return InvalidInput("anneal train needs --config FILE.yaml (see --list-keys)");
  ANNEAL_ASSIGN_OR_RETURN(TrainConfig c, TrainConfig::Load(a.config, a.sets));
  if (auto rank = RankContract::FromEnvironment(); !rank.ok() || rank->rank == 0) {
    std::fputs(c.DeprecationText().c_str(), stderr);  // once per job, not once per rank
  }
  // Under the control plane, a job spec's checkpoint.uri is the default place for checkpoints.
  if (const char* uri = std::getenv("ANNEAL_CHECKPOINT_URI"); c.checkpoint.dir.empty() && uri && *uri) {
    c.checkpoint.dir = uri;
  }
  ANNEAL_RETURN_IF_ERROR(CheckSharedCheckpointDir(c.checkpoint.dir));
  if (a.print_config) {  // what this run would use, $ANNEAL_CHECKPOINT_URI included
    TrainConfig shown = c;
    shown.values["train.checkpoint_dir"] = c.checkpoint.dir;
    std::printf("# the resolved config of anneal train --config %s: every key, after the file, --set and the defaults\n%s",
                a.config.c_str(), shown.ResolvedYaml().c_str());
    return Status::Ok();
  }
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  auto r = RunTraining(c, g_stop, [](const std::string& line) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  });
  if (!r.ok()) return r.status();
  // A signal's stop is no success: the caller (a shell, a launcher, a scheduler) learns from the
  // exit code that the run was cut short, and from the message where to resume.
  if (const int sig = g_stop_signal.load(); r->stopped && sig != 0) {
    std::string where = " at step " + std::to_string(r->steps_done);
    if (!r->last_checkpoint.empty()) {
      where += ": checkpoint " + r->last_checkpoint + " saved; run the same command to resume from it";
    } else {
      where += ": no checkpoint saved (train.checkpoint_dir is unset)";
    }
    return Interrupted(sig, "by " + SignalName(sig) + where);
  }
  return Status::Ok();
}

}  // namespace

void AddTrainCommand(CLI::App& app, RunFn* run) {
  auto a = std::make_shared<TrainArgs>();
  CLI::App* c = app.add_subcommand("train", "Train a GPT model (one rank; the world comes from the environment).");
  c->add_option("--config", a->config, "YAML config: sections model, data, optim, train");
  c->add_option("--set", a->sets, "Override one key, e.g. --set train.steps=50 (repeatable)");
  c->add_flag("--list-keys", a->list_keys, "Print every config key with its default and meaning");
  c->add_flag("--print-config", a->print_config,
              "Print the resolved config (the file, then --set, over the defaults) as YAML and exit without training");
  c->callback([run, a] { *run = [a] { return RunTrain(*a); }; });
}

}  // namespace anneal::cli
