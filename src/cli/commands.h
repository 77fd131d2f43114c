// The subcommands of the anneal binary. Each Add*Command registers its options on app and sets *run
// to the function main() calls when that subcommand was chosen. A command returns a Status; main()
// prints it and maps it to the exit code (0 ok, 1 runtime, 2 bad input, 3 peer/cluster failure).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

#include "core/status.h"

namespace anneal::cli {

using RunFn = std::function<Status()>;

void AddTokenizeCommand(CLI::App& app, RunFn* run);
void AddPrepCommand(CLI::App& app, RunFn* run);
void AddDatasetCommand(CLI::App& app, RunFn* run);
void AddTrainCommand(CLI::App& app, RunFn* run);
void AddSampleCommand(CLI::App& app, RunFn* run);
void AddLaunchCommand(CLI::App& app, RunFn* run);
void AddHealthcheckCommand(CLI::App& app, RunFn* run);
void AddCkptCommand(CLI::App& app, RunFn* run);
void AddHfCommands(CLI::App& app, RunFn* run);  // export, import
void AddEvalCommand(CLI::App& app, RunFn* run);
void AddServerCommand(CLI::App& app, RunFn* run);
void AddAgentCommand(CLI::App& app, RunFn* run);
void AddJobCommands(CLI::App& app, RunFn* run);
void AddSubmitCommand(CLI::App& app, RunFn* run);
void AddUserCommands(CLI::App& app, RunFn* run);
void AddKubernetesCommand(CLI::App& app, RunFn* run);
void AddExecCommand(CLI::App& app, RunFn* run);
void AddProfileCommand(CLI::App& app, RunFn* run);
void AddPlanCommand(CLI::App& app, RunFn* run);

}  // namespace anneal::cli
