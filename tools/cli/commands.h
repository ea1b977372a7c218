// The `commhost` subcommands. Each add* function registers its verbs on the app; the
// callback runs the verb and returns the process exit status through CLI::RuntimeError.
#pragma once

#include <CLI/CLI.hpp>

namespace commhost::cli {

void addPluginsCommand(CLI::App& app);
void addConfigCommand(CLI::App& app);
void addStoreCommand(CLI::App& app);
void addRunCommand(CLI::App& app);
void addBenchCommand(CLI::App& app);

}  // namespace commhost::cli
