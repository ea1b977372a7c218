// SPDX-License-Identifier: Apache-2.0
// commhost config check FILE|-|--default [--set key=value]... | config keys
#include <cstdio>
#include <iostream>
#include <iterator>

#include "commands.h"
#include "commhost/config.h"
#include "commhost/dispatcher.h"
#include "commhost/errors.h"
#include "commhost/registry.h"

namespace commhost::cli {
namespace {

// The largest config the loader takes (it refuses bigger ones with the same words); a
// pipe is read no further than one byte past it, so `yes | config check -` ends.
constexpr size_t kMaxStdinBytes = 1 << 20;

std::string readStdin() {
  std::string text;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0) {
    text.append(buf, n);
    if (text.size() > kMaxStdinBytes)
      throw ConfigError("config <stdin> is over 1,048,576 bytes; a config may be at most 1,048,576 bytes");
  }
  if (std::ferror(stdin)) throw ConfigError("config <stdin>: cannot read standard input");
  return text;
}

// The route table `config check` prints, each line behind "#   ". A tuner orders routes
// per group: its table is shown for the group --world names, else it is said that one applies.
void printRouteTable(const Config& cfg, const PluginRegistry& registry, int world) {
  if (cfg.tuner && world > 0)
    std::cout << "# route table (tuner '" << cfg.tuner->plugin << "', a group of " << world << " ranks on one host):\n";
  else if (cfg.tuner)
    std::cout << "# route table (the config's order; tuner '" << cfg.tuner->plugin
              << "' reorders it per group: --world N shows its choices):\n";
  else std::cout << "# route table" << (world > 0 ? " (no tuner: --world changes nothing)" : "") << ":\n";
  const std::string table = cfg.tuner && world > 0
                                ? RouteTable::forGroup(cfg, registry, {cfg.groupName(), 0, world, world}).describe()
                                : RouteTable::forConfig(cfg, registry).describe();
  std::size_t start = 0;
  while (start < table.size()) {
    const std::size_t nl = table.find('\n', start);
    std::cout << "#   " << table.substr(start, nl - start) << "\n";
    start = nl + 1;
  }
}

void checkConfig(const std::string& file, bool embedded, const std::vector<std::string>& sets, bool strict, int world) {
  if (embedded && !file.empty())
    throw CLI::ValidationError("config check", "give either a FILE ('-' for standard input) or --default, not both");
  if (!embedded && file.empty())
    throw CLI::ValidationError("config check",
                               "give the config FILE, '-' to read it from standard input, or --default for the "
                               "embedded default");
  PluginRegistry registry;
  ConfigOverrides overrides;
  overrides.set = sets;
  Config cfg = embedded      ? loadConfigText(defaultConfigText(), "<embedded default>", registry, overrides)
               : file == "-" ? loadConfigText(readStdin(), "<stdin>", registry, overrides)
                             : loadConfigFile(file, registry, overrides);
  for (const auto& w : cfg.warnings) std::cerr << "warning: " << w << "\n";
  std::cout << "# effective config of " << cfg.source << "\n" << cfg.effectiveYaml;
  char hash[32];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(cfg.hash));
  std::cout << "# config hash: " << hash << "\n";
  printRouteTable(cfg, registry, world);
  if (strict && !cfg.warnings.empty())
    throw ConfigError("config " + cfg.source + ": --strict and " + std::to_string(cfg.warnings.size()) +
                      " warning(s) above; fix them, or check without --strict");
}

}  // namespace

void addConfigCommand(CLI::App& app) {
  auto* config = app.add_subcommand("config", "Check a configuration, or list the keys one may set");
  config->require_subcommand(1);
  config->footer(
      "Examples:\n"
      "  commhost config check configs/gloo.yaml\n"
      "  commhost config check --default            the embedded default\n"
      "  commhost config keys                       every host key, its default and variable");
  static std::string file;
  static bool embedded = false;
  static std::vector<std::string> sets;
  static bool strict = false;
  static int world = 0;
  auto* check = config->add_subcommand("check", "Print the effective config and route table, or every error");
  check->add_option("file", file, "The YAML config file, or '-' to read it from standard input");
  check->add_flag("--default", embedded, "Check the embedded default config (configs/default.yaml as shipped)");
  check->add_option("--set", sets, "Override a key: --set group.timeout=10s (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  check->add_flag("--strict", strict,
                  "Fail (exit 1) on any warning too: an unavailable plugin, an unknown COMMHOST_ variable, ...");
  check
      ->add_option("--world", world,
                   "With a `tuner:`, print the table the tuner builds for a group of this many ranks on one host "
                   "(without it: the config's own order)")
      ->check(CLI::PositiveNumber);
  check->footer(
      "Examples:\n"
      "  commhost config check configs/gloo.yaml --set group.timeout=10s\n"
      "  commhost config check tuned.yaml --world 4  the routes its tuner picks for 4 ranks\n"
      "  commhost config check - < my.yaml          read the config from standard input\n"
      "  commhost config check --default            the embedded default, with COMMHOST_* variables applied");
  check->callback([] { checkConfig(file, embedded, sets, strict, world); });

  // Printed from configSchema(), as `plugins inspect` prints a plugin's options: a key
  // added to the schema appears here with nothing else to update.
  auto* keys = config->add_subcommand("keys", "Every host config key: type, default, range, help, variable");
  keys->footer(
      "Examples:\n"
      "  commhost config keys\n"
      "  commhost config keys | grep -A2 group.timeout");
  keys->callback([] {
    std::cout << "host keys (plugin options: commhost plugins inspect NAME):\n" << describeOptions(configSchema(), "");
  });
}

}  // namespace commhost::cli
