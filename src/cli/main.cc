// anneal: one binary, many subcommands (DESIGN.md "The command line").
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "anneal_version.h"
#include "cli/commands.h"
#include "train/config.h"  // EditDistance

namespace {

// A first word that names no command: exit 2 with the closest command's name ("did you mean").
// Returns -1 when argv names a command (or starts with an option), else the exit code.
int RefuseUnknownCommand(const CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return -1;
  const std::string word = argv[1];
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const CLI::App* sub : app.get_subcommands(nullptr)) {
    if (sub->check_name(word)) return -1;
    const size_t d = anneal::EditDistance(word, sub->get_name());
    if (d < best_d) best_d = d, best = sub->get_name();
  }
  std::string msg = "anneal: error: '" + word + "' is not an anneal command";
  // Close enough to be a typo: at most 2 edits, and fewer than half the word's letters.
  if (!best.empty() && best_d <= 2 && best_d * 2 < word.size()) msg += "; did you mean '" + best + "'?";
  std::fprintf(stderr, "%s (anneal --help lists every command)\n", msg.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"anneal: self-hosted training of large language models on a cluster.\n"
               "Run 'anneal COMMAND --help' for a command's options."};
  app.set_version_flag("--version", std::string("anneal ") + ANNEAL_VERSION + " (commit " + ANNEAL_GIT_COMMIT + ")");
  app.require_subcommand(1);
  anneal::cli::RunFn run;
#ifdef ANNEAL_SLIM  // the slim build (cmake/slim.cmake): the training commands only
  anneal::cli::AddDatasetCommand(app, &run);
  anneal::cli::AddTrainCommand(app, &run);
  anneal::cli::AddSampleCommand(app, &run);
  anneal::cli::AddCkptCommand(app, &run);
#else
  anneal::cli::AddTokenizeCommand(app, &run);
  anneal::cli::AddPrepCommand(app, &run);
  anneal::cli::AddDatasetCommand(app, &run);
  anneal::cli::AddTrainCommand(app, &run);
  anneal::cli::AddSampleCommand(app, &run);
  anneal::cli::AddLaunchCommand(app, &run);
  anneal::cli::AddHealthcheckCommand(app, &run);
  anneal::cli::AddCkptCommand(app, &run);
  anneal::cli::AddHfCommands(app, &run);
  anneal::cli::AddEvalCommand(app, &run);
  anneal::cli::AddServerCommand(app, &run);
  anneal::cli::AddAgentCommand(app, &run);
  anneal::cli::AddSubmitCommand(app, &run);
  anneal::cli::AddJobCommands(app, &run);
  anneal::cli::AddUserCommands(app, &run);
  anneal::cli::AddKubernetesCommand(app, &run);
  anneal::cli::AddExecCommand(app, &run);
  anneal::cli::AddProfileCommand(app, &run);
  anneal::cli::AddPlanCommand(app, &run);
#endif
  if (int rc = RefuseUnknownCommand(app, argc, argv); rc >= 0) return rc;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    // --help and --version exit 0; a usage error is bad input: exit 2.
    return rc == 0 ? 0 : 2;
  }
  anneal::Status st;
  try {
    st = run ? run() : anneal::Internal("no command chosen");
  } catch (const nlohmann::json::exception& e) {
    // JSON used as it was not (a reply of another shape read by a command the fuzzed views of
    // cli/job_text.h do not cover): an error with a message and exit 1, not std::terminate's abort.
    st = anneal::Internal(std::string("unexpected JSON: ") + e.what());
  }
  if (!st.ok()) {
    std::fflush(stdout);
    // An interruption is what was asked for (Ctrl-C, a stop): said as such, not as an error.
    std::cerr << (st.code() == anneal::Code::kInterrupted ? "anneal: " : "anneal: error: ") << st.ToString() << "\n";
  }
  return st.ExitCode();
}
