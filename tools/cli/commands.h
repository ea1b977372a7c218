// SPDX-License-Identifier: Apache-2.0
// The `commhost` subcommands. Each add* function registers its verbs on the app; the
// callback runs the verb and returns the process exit status through CLI::RuntimeError.
#pragma once

#include <CLI/CLI.hpp>

namespace commhost::cli {

// The arguments after the first "--" on the command line (the program of `run`); main
// cuts them off before CLI11 parses, so options of that program are never taken as ours.
std::vector<std::string>& trailingArgs();

void addPluginsCommand(CLI::App& app);
void addConfigCommand(CLI::App& app);
void addStoreCommand(CLI::App& app);
void addRunCommand(CLI::App& app);
void addBenchCommand(CLI::App& app);
void addTuneCommand(CLI::App& app);
void addTraceCommand(CLI::App& app);
void addTrainCommand(CLI::App& app);
void addStatusCommand(CLI::App& app);
void addTopCommand(CLI::App& app);

}  // namespace commhost::cli
