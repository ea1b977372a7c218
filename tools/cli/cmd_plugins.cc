// SPDX-License-Identifier: Apache-2.0
// commhost plugins list | inspect NAME|PATH
#include <iomanip>
#include <iostream>

#include "commands.h"
#include "commhost/registry.h"

namespace commhost::cli {
namespace {

std::string status(const PluginEntry& e) { return e.usable() ? "ok" : "unavailable: " + e.unavailable; }

void printOptions(const PluginDescriptor& d) {
  if (d.options.empty()) {
    std::cout << "options: none\n";
    return;
  }
  std::cout << "options:\n";
  for (const auto& o : d.options) {
    std::cout << "  " << o.key << " (" << optionTypeName(o.type);
    if (!o.choices.empty()) {
      std::cout << ":";
      for (const auto& c : o.choices) std::cout << " " << c;
    }
    std::cout << ", default: " << (*o.defaultValue ? o.defaultValue : "\"\"") << ")\n      " << o.description << "\n";
  }
}

int inspect(const std::string& what, const std::vector<std::string>& paths) {
  PluginRegistry registry;
  const PluginEntry* entry = nullptr;
  if (what.find('/') != std::string::npos || (what.size() > 3 && what.compare(what.size() - 3, 3, ".so") == 0)) {
    entry = &registry.loadFile(what);  // throws with the reason it cannot be used
  } else {
    registry.scan(PluginRegistry::searchPath(paths));
    entry = registry.find(what);
    if (!entry) registry.require(what, PluginKind::Backend);  // throws "not found" with hints
  }
  std::cout << "name: " << entry->name << "\npath: " << entry->path << "\n";
  // The toolchain it was built with; with the layouts too when the loader refused it.
  if (entry->build.size)
    std::cout << "built with: " << (entry->descriptor ? describeToolchain(entry->build) : describe(entry->build))
              << "\n";
  if (!entry->descriptor) {
    std::cout << "status: unavailable: " << entry->unavailable << "\n";
    return 1;
  }
  const PluginDescriptor& d = *entry->descriptor;
  std::cout << "kind: " << pluginKindName(d.kind) << "\nversion: " << d.version << "\ndescription: " << d.description
            << "\nstatus: " << status(*entry) << "\n";
  if (d.kind == PluginKind::Backend) std::cout << describe(d.capabilities) << "\n";
  printOptions(d);
  return entry->usable() ? 0 : 1;
}

int list(const std::vector<std::string>& paths) {
  PluginRegistry registry;
  const auto dirs = PluginRegistry::searchPath(paths);
  registry.scan(dirs);
  std::cout << std::left << std::setw(14) << "NAME" << std::setw(11) << "KIND" << std::setw(10) << "VERSION"
            << "STATUS / PATH\n";
  for (const auto& e : registry.entries()) {
    std::cout << std::setw(14) << e.name << std::setw(11) << (e.descriptor ? pluginKindName(e.descriptor->kind) : "?")
              << std::setw(10) << (e.descriptor ? e.descriptor->version : "?") << status(e) << "\n"
              << std::setw(35) << "" << e.path << "\n";
  }
  std::cout << "searched:";
  for (const auto& d : dirs) std::cout << " " << d;
  std::cout << "\n";
  return 0;
}

}  // namespace

void addPluginsCommand(CLI::App& app) {
  auto* plugins = app.add_subcommand("plugins", "List the plugins found, or inspect one");
  plugins->require_subcommand(1);
  plugins->footer(
      "Examples:\n"
      "  commhost plugins list\n"
      "  commhost plugins inspect gloo");
  static std::vector<std::string> paths;
  plugins->add_option("--plugin-path", paths, "Extra directories to search first (as plugin_path in a config)");

  auto* listCmd = plugins->add_subcommand("list", "Every plugin found on the search path, with its status");
  listCmd->footer(
      "Examples:\n"
      "  commhost plugins list\n"
      "To search DIR first: commhost plugins --plugin-path DIR list");
  listCmd->callback([] {
    const int rc = list(paths);
    if (rc) throw CLI::RuntimeError(rc);
  });

  static std::string target;
  auto* inspectCmd = plugins->add_subcommand("inspect", "Descriptor, capabilities and options of one plugin");
  inspectCmd->add_option("plugin", target, "A plugin name, or the path of a plugin file")->required();
  inspectCmd->footer(
      "Examples:\n"
      "  commhost plugins inspect gloo\n"
      "  commhost plugins inspect ./libcommhost_mybackend.so   a file not on the search path");
  inspectCmd->callback([] {
    const int rc = inspect(target, paths);
    if (rc) throw CLI::RuntimeError(rc);
  });
}

}  // namespace commhost::cli
