// SPDX-License-Identifier: Apache-2.0
// commhost: run, inspect and check commhost jobs. See `commhost --help`.
#include <exception>
#include <iostream>

#include "commands.h"
#include "commhost/errors.h"
#include "commhost/version.h"

namespace commhost::cli {
std::vector<std::string>& trailingArgs() {
  static std::vector<std::string> args;
  return args;
}
}  // namespace commhost::cli

namespace {

// Everything main does, so that main's catch covers all of it (building the parser can
// throw too, e.g. std::bad_alloc).
int run(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) != "--") continue;
    for (int j = i + 1; j < argc; ++j) commhost::cli::trailingArgs().push_back(argv[j]);
    argc = i;
    break;
  }
  CLI::App app{"commhost " COMMHOST_VERSION
               " - a host for collective communication with backend, store and "
               "comm-hook plugins"};
  app.footer(
      "Examples:\n"
      "  commhost run -n 4 -c configs/gloo.yaml -- commhost bench --op all --check\n"
      "  commhost plugins list                     what was found, and why something is unavailable\n"
      "  commhost plugins inspect self             descriptor, capabilities and options of one plugin\n"
      "  commhost config check configs/default.yaml --set group.timeout=10s\n"
      "                                            the effective config and route table, or every error\n"
      "  commhost trace analyze /tmp/commhost-traces-$(id -u)\n"
      "                                            the first collective where ranks diverged\n"
      "  commhost store serve --port 29500 --token SECRET\n"
      "                                            a standalone store for ranks configured with serve: never");
  app.set_version_flag("--version", "commhost " COMMHOST_VERSION " (plugin ABI " + std::to_string(COMMHOST_ABI_MAJOR) +
                                        "." + std::to_string(COMMHOST_ABI_MINOR) + ")");
  app.require_subcommand(1);
  commhost::cli::addPluginsCommand(app);
  commhost::cli::addConfigCommand(app);
  commhost::cli::addStoreCommand(app);
  commhost::cli::addRunCommand(app);
  commhost::cli::addBenchCommand(app);
  commhost::cli::addTraceCommand(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const commhost::Error& e) {
    std::cerr << "commhost: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    // A system call that failed (pipe, fork, signalfd, a free port): never a bare
    // std::terminate, and the usual causes named.
    std::cerr << "commhost: " << e.what()
              << ". This is a system limit (open files: ulimit -n; processes: ulimit -u; memory) or a bug; "
                 "raise the limit, or report it with the command line\n";
    return 1;
  } catch (...) {
    std::cerr << "commhost: failed with an exception that is not a std::exception; report it with the command line\n";
    return 1;
  }
}
