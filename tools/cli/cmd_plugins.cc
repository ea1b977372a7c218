// SPDX-License-Identifier: Apache-2.0
// commhost plugins list | inspect NAME|PATH [-c CONFIG] [--plugin-path DIR]...
#include <ctime>
#include <iomanip>
#include <iostream>

#include "commands.h"
#include "commhost/config.h"
#include "commhost/registry.h"
#include "plugin_probe.h"

namespace commhost::cli {
namespace {

std::string status(const PluginEntry& e) { return e.usable() ? "ok" : "unavailable: " + e.unavailable; }

// Options are printed from the plugin's own schema, in the format of `commhost config
// keys`, each with the variable that sets it.
void printOptions(const PluginDescriptor& d) {
  if (d.options.empty()) {
    std::cout << "options: none\n";
    return;
  }
  const std::string name = d.name;
  // A store and a tuner are configured once, under their own key.
  if (d.kind == PluginKind::Store || d.kind == PluginKind::Tuner) {
    std::cout << "options:\n"
              << describeOptions(d.options, std::string(d.kind == PluginKind::Store ? "store" : "tuner") + ".options");
    return;
  }
  // A backend or hook is configured under a name of the user's; the variables shown
  // are those of an entry named after the plugin, the usual choice.
  const std::string table = d.kind == PluginKind::Backend ? "backends" : "hooks";
  std::cout << "options (env: for " << table << "." << name << "; for another entry N: COMMHOST_"
            << (d.kind == PluginKind::Backend ? "BACKENDS" : "HOOKS")
            << "_<N>_OPTIONS_<KEY>, N upper-cased with other characters as '_'):\n"
            << describeOptions(d.options, table + "." + name + ".options");
}

// Where plugins are searched: --plugin-path first, then the plugin_path of the config
// (-c, else COMMHOST_CONFIG), then COMMHOST_PLUGIN_PATH and the installed folder.
struct Search {
  std::vector<std::string> paths;
  std::string config;
  // Each file is loaded in a child first (plugin_probe.h), for at most this many
  // seconds; 0: loaded here directly.
  double probeSeconds = 5;
};

// Scans `dirs`, each file tried in a child process first unless the limit is 0.
void scanSafely(PluginRegistry& registry, const std::vector<std::string>& dirs, const Search& search) {
  if (search.probeSeconds <= 0) return registry.scan(dirs);
  const std::chrono::milliseconds limit(static_cast<int64_t>(search.probeSeconds * 1000));
  registry.scan(dirs, [limit](const std::string& path) { return probeInChild(path, limit); });
}

std::vector<std::string> searchDirs(const Search& search) {
  std::vector<std::string> dirs = search.paths;
  const std::string config = search.config.empty() ? configPathFromEnvironment() : search.config;
  if (!config.empty()) {
    std::vector<std::string> warnings;
    for (const auto& d : configPluginPath(config, warnings)) dirs.push_back(d);
    for (const auto& w : warnings) std::cerr << "warning: " << w << "\n";
  }
  return PluginRegistry::searchPath(dirs);
}

void addSearchOptions(CLI::App* cmd, Search& search) {
  cmd->add_option("--plugin-path", search.paths, "Extra directories to search first (as plugin_path in a config)");
  cmd->add_option("-c,--config", search.config,
                  "Also search the config's plugin_path (relative entries: from the config's folder); "
                  "default: COMMHOST_CONFIG");
  cmd->add_option("--probe-timeout", search.probeSeconds,
                  "Seconds that loading one plugin file in a child process (first, so that a file that hangs or "
                  "crashes is reported, not fatal) may take; 0: load in this process")
      ->type_name("SECONDS")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
}

int inspect(const std::string& what, const Search& search) {
  PluginRegistry registry;
  const PluginEntry* entry = nullptr;
  if (what.find('/') != std::string::npos || (what.size() > 3 && what.compare(what.size() - 3, 3, ".so") == 0)) {
    entry = &registry.loadFile(what);  // throws with the reason it cannot be used
  } else {
    scanSafely(registry, searchDirs(search), search);
    entry = registry.find(what);
    if (!entry) registry.require(what, PluginKind::Backend);  // throws "not found" with hints
  }
  std::cout << "name: " << entry->name << "\npath: " << entry->path << "\n";
  // What a hot swap with reloadPlugins compares across ranks, and what tells a rebuilt file.
  if (entry->file.size >= 0) {
    const std::time_t mtime = static_cast<std::time_t>(entry->file.mtimeNs / 1000000000);
    char when[32] = "?";
    std::tm utc{};
    if (::gmtime_r(&mtime, &utc)) std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &utc);
    std::cout << "file: " << entry->file.size << " bytes, modified " << when << ", inode " << entry->file.inode
              << ", build hash " << registry.fileHash(entry->name) << "\n";
  }
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
  if (d.kind == PluginKind::CommHook && d.wrapName)
    std::cout << "wraps: other hooks, as `wrap: " << d.wrapName << "` on a hooks: entry\n";
  printOptions(d);
  return entry->usable() ? 0 : 1;
}

int list(const Search& search) {
  PluginRegistry registry;
  const auto dirs = searchDirs(search);
  scanSafely(registry, dirs, search);
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
  // Given before the verb (`plugins --plugin-path DIR list`), as earlier versions took it.
  static std::vector<std::string> paths;
  plugins->add_option("--plugin-path", paths, "Extra directories to search first (as plugin_path in a config)");
  static Search search;
  auto withPaths = [] {
    Search s = search;
    s.paths.insert(s.paths.begin(), paths.begin(), paths.end());
    return s;
  };

  auto* listCmd = plugins->add_subcommand("list", "Every plugin found on the search path, with its status");
  listCmd->footer(
      "Examples:\n"
      "  commhost plugins list\n"
      "  commhost plugins list -c configs/gloo.yaml    with the config's plugin_path\n"
      "  commhost plugins list --plugin-path DIR       search DIR first");
  addSearchOptions(listCmd, search);
  listCmd->callback([withPaths] {
    const int rc = list(withPaths());
    if (rc) throw CLI::RuntimeError(rc);
  });

  static std::string target;
  auto* inspectCmd = plugins->add_subcommand("inspect", "Descriptor, capabilities and options of one plugin");
  inspectCmd->add_option("plugin", target, "A plugin name, or the path of a plugin file")->required();
  inspectCmd->footer(
      "Examples:\n"
      "  commhost plugins inspect gloo\n"
      "  commhost plugins inspect ./libcommhost_mybackend.so   a file not on the search path");
  addSearchOptions(inspectCmd, search);
  inspectCmd->callback([withPaths] {
    const int rc = inspect(target, withPaths());
    if (rc) throw CLI::RuntimeError(rc);
  });
}

}  // namespace commhost::cli
