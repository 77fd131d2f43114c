// anneal train: one rank of training from a YAML config (train/config.h lists every key).
// SIGTERM or SIGINT: finish the current step, save a checkpoint, exit 0. With train.checkpoint_dir
// unset, $ANNEAL_CHECKPOINT_URI (set by the agent from the job spec's checkpoint.uri) is used.
#include <csignal>
#include <cstdlib>
#include <cstdio>

#include "cli/commands.h"
#include "train/trainer.h"

namespace anneal::cli {

namespace {

std::atomic<bool> g_stop{false};
extern "C" void OnStopSignal(int) { g_stop.store(true); }

struct TrainArgs {
  std::string config;
  std::vector<std::string> sets;
  bool list_keys = false;
};

Status RunTrain(const TrainArgs& a) {
  if (a.list_keys) {
    for (const auto& k : TrainConfig::Keys()) std::printf("%s\n", k.c_str());
    return Status::Ok();
  }
  if (a.config.empty()) return InvalidInput("anneal train needs --config FILE.yaml (see --list-keys)");
  ANNEAL_ASSIGN_OR_RETURN(TrainConfig c, TrainConfig::Load(a.config, a.sets));
  // Under the control plane, a job spec's checkpoint.uri is the default place for checkpoints.
  if (const char* uri = std::getenv("ANNEAL_CHECKPOINT_URI"); c.checkpoint.dir.empty() && uri && *uri) {
    c.checkpoint.dir = uri;
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
  return Status::Ok();
}

}  // namespace

void AddTrainCommand(CLI::App& app, RunFn* run) {
  auto a = std::make_shared<TrainArgs>();
  CLI::App* c = app.add_subcommand("train", "Train a GPT model (one rank; the world comes from the environment).");
  c->add_option("--config", a->config, "YAML config: sections model, data, optim, train");
  c->add_option("--set", a->sets, "Override one key, e.g. --set train.steps=50 (repeatable)");
  c->add_flag("--list-keys", a->list_keys, "Print every config key with its default and meaning");
  c->callback([run, a] { *run = [a] { return RunTrain(*a); }; });
}

}  // namespace anneal::cli
