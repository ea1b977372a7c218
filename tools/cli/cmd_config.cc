// SPDX-License-Identifier: Apache-2.0
// commhost config check FILE [--set key=value]... | config keys
#include <cstdio>
#include <iostream>

#include "commands.h"
#include "commhost/config.h"
#include "commhost/dispatcher.h"
#include "commhost/registry.h"

namespace commhost::cli {

void addConfigCommand(CLI::App& app) {
  auto* config = app.add_subcommand("config", "Check a configuration, or list the keys one may set");
  config->require_subcommand(1);
  static std::string file;
  static std::vector<std::string> sets;
  auto* check = config->add_subcommand("check", "Print the effective config and route table, or every error");
  check->add_option("file", file, "The YAML config file ('-' for the embedded default)")->required();
  check->add_option("--set", sets, "Override a key: --set group.timeout=10s (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  check->callback([] {
    PluginRegistry registry;
    ConfigOverrides overrides;
    overrides.set = sets;
    Config cfg = file == "-" ? loadConfigText(defaultConfigText(), "<embedded default>", registry, overrides)
                             : loadConfigFile(file, registry, overrides);
    for (const auto& w : cfg.warnings) std::cerr << "warning: " << w << "\n";
    std::cout << "# effective config of " << cfg.source << "\n" << cfg.effectiveYaml;
    char hash[32];
    std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(cfg.hash));
    std::cout << "# config hash: " << hash << "\n# route table:\n";
    const std::string table = RouteTable::forConfig(cfg, registry).describe();
    std::size_t start = 0;
    while (start < table.size()) {
      const std::size_t nl = table.find('\n', start);
      std::cout << "#   " << table.substr(start, nl - start) << "\n";
      start = nl + 1;
    }
  });

  // Printed from configSchema(), as `plugins inspect` prints a plugin's options: a key
  // added to the schema appears here with nothing else to update.
  auto* keys = config->add_subcommand("keys", "Every host config key: type, default, range, help, variable");
  keys->callback([] {
    std::cout << "host keys (plugin options: commhost plugins inspect NAME):\n" << describeOptions(configSchema(), "");
  });
}

}  // namespace commhost::cli
