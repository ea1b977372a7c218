// SPDX-License-Identifier: Apache-2.0
// commhost: run, inspect and check commhost jobs. See `commhost --help`.
#include <exception>
#include <iostream>

#include "commands.h"
#include "commhost/errors.h"
#include "commhost/sdk/option_schema.h"
#include "commhost/version.h"

namespace commhost::cli {
std::vector<std::string>& trailingArgs() {
  static std::vector<std::string> args;
  return args;
}
}  // namespace commhost::cli

namespace {

// The subcommand of `parent` that `word` names, or null (CLI11 2.1 has no no-throw lookup).
CLI::App* subcommandNamed(const CLI::App& parent, const std::string& word) {
  for (CLI::App* sub :
       const_cast<CLI::App&>(parent).get_subcommands([](const CLI::App* a) { return !a->get_name().empty(); }))
    if (sub->check_name(word)) return sub;
  return nullptr;
}

// "plugins, config, ..." and the nearest of them to `word` (edit distance), for the
// message about a subcommand that does not exist.
std::string unknownCommandMessage(const CLI::App& parent, const std::string& word) {
  std::vector<std::string> names;
  for (const CLI::App* sub : parent.get_subcommands([](const CLI::App* a) { return !a->get_name().empty(); }))
    names.push_back(sub->get_name());
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
  // The words from the top to `parent`: "" for the top level, "config" below it.
  std::string path;
  for (const CLI::App* a = &parent; a->get_parent(); a = a->get_parent())
    path = a->get_name() + (path.empty() ? "" : " " + path);
  const std::string command = path.empty() ? "commhost" : "commhost " + path;
  const std::string nearest = commhost::closestMatch(word, names);
  std::string text = command + ": unknown command '" + word + "'";
  if (!nearest.empty()) text += " (did you mean `" + nearest + "`?)";
  const std::string helpOf = path.empty() ? "commhost help" : "commhost help " + path;
  return text + "; its commands: " + list + ". See `" + helpOf + "`";
}

// CLI11 reports a misspelt subcommand as an unexpected argument, or as a missing
// subcommand. Walk the words as CLI11 will, from the top: at each level that has
// subcommands, the first word that is not an option must name one of them. Returns the
// message for the first one that does not, or "".
std::string findUnknownCommand(CLI::App& app, int argc, char** argv) {
  CLI::App* level = &app;
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.size() > 1 && word[0] == '-') {
      // An option taking a value (`plugins --plugin-path DIR list`) consumes the next word.
      if (word.find('=') != std::string::npos) continue;
      const CLI::Option* opt = level->get_option_no_throw(word);
      if (opt && opt->get_type_size() > 0 && opt->get_items_expected_min() > 0) ++i;
      continue;
    }
    if (level->get_subcommands([](const CLI::App* a) { return !a->get_name().empty(); }).empty()) return "";
    CLI::App* sub = subcommandNamed(*level, word);
    if (!sub) return unknownCommandMessage(*level, word);
    level = sub;
  }
  return "";
}

// `commhost help [COMMAND [SUBCOMMAND]]`: the --help of that command.
void addHelpCommand(CLI::App& app) {
  auto* help = app.add_subcommand("help", "Show the help of a command: commhost help config check");
  static std::vector<std::string> words;
  help->add_option("command", words, "The command (and subcommand) to show the help of");
  help->footer(
      "Examples:\n"
      "  commhost help                       every command\n"
      "  commhost help config check          the same as commhost config check --help");
  help->callback([&app] {
    const CLI::App* level = &app;
    for (const auto& w : words) {
      const CLI::App* sub = subcommandNamed(*level, w);
      if (!sub) {
        std::cerr << unknownCommandMessage(*level, w) << "\n";
        throw CLI::RuntimeError(2);
      }
      level = sub;
    }
    // Not level->help(): on the top level that shows the help of the subcommand parsed
    // (this one). The usage line starts with the words leading to `level`.
    std::string path;
    for (const CLI::App* a = level; a->get_parent(); a = a->get_parent()) path = " " + a->get_name() + path;
    std::cout << level->get_formatter()->make_help(level, "commhost" + path, CLI::AppFormatMode::Normal);
  });
}

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
      "  commhost run -n 4 -c configs/shm.yaml -- commhost train --check\n"
      "                                            data-parallel training through the Reducer and a comm hook\n"
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
  commhost::cli::addTuneCommand(app);
  commhost::cli::addTraceCommand(app);
  commhost::cli::addTrainCommand(app);
  commhost::cli::addStatusCommand(app);
  commhost::cli::addTopCommand(app);
  addHelpCommand(app);
  const std::string unknown = findUnknownCommand(app, argc, argv);
  if (!unknown.empty()) {
    std::cerr << unknown << "\n";
    return 2;
  }
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
