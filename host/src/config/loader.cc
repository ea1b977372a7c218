// SPDX-License-Identifier: Apache-2.0
#include <sys/stat.h>
#include <yaml-cpp/depthguard.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <unordered_map>

#include "commhost/config.h"
#include "commhost/dispatcher.h"
#include "commhost/errors.h"
#include "commhost/registry.h"
#include "environment.h"
#include "overrides.h"
#include "route_entries.h"
#include "yaml_options.h"

namespace commhost {
namespace {

using config::child;
using config::escaped;
using config::invalidUtf8At;
using config::Problems;
using config::withThousands;

const std::vector<std::string> kTables = {"store", "backends", "routes", "hooks", "tuner"};
// Left empty, it becomes config::defaultDumpDir() here (the environment is read in config/ only).
constexpr const char* kDumpDirKey = "supervisor.flight_recorder.dump_dir";
constexpr const char* kJoinKey = "group.join";

// A config is a few KiB; the cap keeps a runaway file (a generated one, a log given by
// mistake) from costing gigabytes in the YAML parser before any check runs.
constexpr size_t kMaxConfigBytes = 1 << 20;

std::string tooBig(const std::string& source, size_t bytes) {
  return "config " + source + " is " + withThousands(bytes) + " bytes; a config may be at most " +
         withThousands(kMaxConfigBytes) + " bytes (1 MiB). Is this the right file?";
}

// yaml-cpp keeps every entry of a map, duplicates included, and lookups then see only
// one of them: walk every map (iteratively: depth is bounded by the parser, not by us)
// and report each key given twice, with both places.
void checkDuplicateKeys(const YAML::Node& root, Problems& problems) {
  std::vector<std::pair<YAML::Node, std::string>> stack = {{root, ""}};
  while (!stack.empty()) {
    auto [node, path] = std::move(stack.back());
    stack.pop_back();
    if (node.IsSequence()) {
      for (size_t i = 0; i < node.size(); ++i) stack.emplace_back(node[i], path + "[" + std::to_string(i) + "]");
    } else if (node.IsMap()) {
      std::unordered_map<std::string, YAML::Mark> seen;
      for (const auto& kv : node) {
        if (!kv.first.IsScalar()) continue;  // reported where the map is read
        const std::string key = kv.first.Scalar();
        const std::string keyPath = path.empty() ? key : path + "." + key;
        auto [it, fresh] = seen.emplace(key, kv.first.Mark());
        if (!fresh)
          problems.add(kv.first, keyPath,
                       "duplicate key: also given at line " + std::to_string(it->second.line + 1) + ":" +
                           std::to_string(it->second.column + 1) + " (YAML keeps only one; remove or merge them)");
        stack.emplace_back(kv.second, keyPath);
      }
    }
  }
}

// Where the parser failed, said the way a user can act on.
[[noreturn]] void throwParseError(const YAML::ParserException& e, const std::string& text, const std::string& source) {
  // A tab in the indentation of any line up to the failure is the usual cause.
  size_t line = 0, start = 0;
  for (; start < text.size() && static_cast<int>(line) <= e.mark.line; ++line) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    size_t i = start;
    while (i < end && text[i] == ' ') ++i;
    if (i < end && text[i] == '\t')
      throw ConfigError("config " + source + ":" + std::to_string(line + 1) + ":" + std::to_string(i - start + 1) +
                        ": YAML does not allow tabs for indentation; indent with spaces (malformed YAML: " + e.msg +
                        ")");
    start = end + 1;
  }
  throw ConfigError("config " + source + ":" + std::to_string(e.mark.line + 1) + ":" +
                    std::to_string(e.mark.column + 1) + ": malformed YAML: " + e.msg);
}

uint64_t fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::vector<std::string> topLevelNames() {
  std::vector<std::string> names = kTables;
  for (const auto& spec : configSchema()) {
    const std::string key = spec.key;
    const std::string top = key.substr(0, key.find('.'));
    if (std::find(names.begin(), names.end(), top) == names.end()) names.push_back(top);
  }
  return names;
}

std::vector<std::string> namesOfKind(const PluginRegistry& registry, PluginKind kind) {
  std::vector<std::string> names;
  for (const auto& e : registry.entries())
    if (!e.descriptor || e.descriptor->kind == kind) names.push_back(e.name);
  return names;
}

// `wrap: NAME` of a hooks: entry: the comm-hook plugin whose descriptor calls itself NAME
// (wrapName, e.g. fp16), or is named NAME. Returns that plugin's name, "" after a problem.
std::string resolveWrap(const YAML::Node& node, const std::string& path, const std::string& hookPlugin,
                        const PluginRegistry& registry, Problems& problems) {
  std::vector<std::string> names;
  std::string list;
  const PluginEntry* wrapper = nullptr;
  const std::string wanted = node.IsScalar() ? node.Scalar() : "";
  for (const auto& e : registry.entries()) {
    if (!e.descriptor || e.descriptor->kind != PluginKind::CommHook || !e.descriptor->wrapName) continue;
    names.push_back(e.descriptor->wrapName);
    list += (list.empty() ? "" : ", ") + std::string(e.descriptor->wrapName) + " (" + e.name + ")";
    if (wanted == e.descriptor->wrapName || wanted == e.name) wrapper = &e;
  }
  const std::string wrappers = "; wrappers: " + (list.empty() ? std::string("none") : list);
  if (wanted.empty()) {
    problems.add(node, path, "expected a wrapper's name, e.g. wrap: fp16" + wrappers);
    return "";
  }
  if (!wrapper) {
    const PluginEntry* other = registry.find(wanted);
    if (other && other->descriptor && other->descriptor->kind != PluginKind::CommHook) {
      problems.add(node, path,
                   "plugin '" + wanted + "' is a " + pluginKindName(other->descriptor->kind) +
                       " plugin, not a comm-hook wrapper" + wrappers);
    } else if (other && other->descriptor) {
      problems.add(
          node, path,
          "comm-hook plugin '" + wanted + "' cannot wrap another hook (its descriptor has no wrapName)" + wrappers);
    } else {
      const std::string hint = closestMatch(wanted, names);
      problems.add(node, path,
                   "unknown wrapper '" + wanted + "'" + (hint.empty() ? "" : " (did you mean '" + hint + "'?)") +
                       wrappers + ". Check plugin_path / COMMHOST_PLUGIN_PATH, or run `commhost plugins list`");
    }
    return "";
  }
  if (wrapper->name == hookPlugin) {
    problems.add(node, path,
                 "a wrapper around itself: '" + wanted + "' is plugin '" + hookPlugin +
                     "', the hook it would wrap; use the plugin alone, or wrap another hook");
    return "";
  }
  return wrapper->name;
}

// The warning for a plugin that loaded but cannot run here: what that means for its kind.
std::string unavailableHere(const std::string& path, const std::string& plugin, const std::string& why,
                            PluginKind kind) {
  return path + ": plugin '" + plugin + "' is unavailable here (" + why + ")" +
         (kind == PluginKind::Backend
              ? "; a route's list passes it over for the next backend, and a route to it alone fails when used"
              : "; using it is an error");
}

// `node` is { plugin: NAME, options: {...} }; `plugin` defaults to `defaultPlugin`.
PluginRef parsePluginRef(const YAML::Node& node, const std::string& path, const std::string& defaultPlugin,
                         PluginKind kind, const PluginRegistry& registry, Problems& problems,
                         std::vector<std::string>& warnings) {
  PluginRef ref;
  ref.where = problems.where(node, path);
  ref.plugin = defaultPlugin;
  YAML::Node options(YAML::NodeType::Undefined);
  YAML::Node wrap(YAML::NodeType::Undefined);
  if (node.IsScalar()) {
    ref.plugin = node.Scalar();  // shorthand: `store: hash`
  } else if (node.IsMap()) {
    for (const auto& kv : node) {
      const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
      if (key == "plugin" && kv.second.IsScalar()) {
        ref.plugin = kv.second.Scalar();
      } else if (key == "options") {
        options.reset(kv.second);
      } else if (key == "wrap" && kind == PluginKind::CommHook) {
        wrap.reset(kv.second);
      } else if (key == "wrap") {
        problems.add(kv.first, path + ".wrap",
                     "only a comm hook (an entry of hooks:) can be wrapped; this is a " +
                         std::string(pluginKindName(kind)) + " entry: remove `wrap`");
      } else {
        const bool hook = kind == PluginKind::CommHook;
        const std::string hint = closestMatch(key, hook ? std::vector<std::string>{"plugin", "options", "wrap"}
                                                        : std::vector<std::string>{"plugin", "options"});
        problems.add(kv.first, path + "." + key,
                     key == "plugin" ? "expected a plugin name"
                                     : "unknown key" + (hint.empty() ? "" : " (did you mean '" + hint + "'?)") +
                                           "; allowed here: plugin, options" + (hook ? ", wrap" : ""));
      }
    }
  } else if (node.IsDefined() && !node.IsNull()) {
    problems.add(node, path, "expected { plugin: NAME, options: {...} }");
    return ref;
  }
  const PluginEntry* entry = registry.find(ref.plugin);
  if (!entry) {
    const auto names = namesOfKind(registry, kind);
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    const std::string hint = closestMatch(ref.plugin, names);
    problems.add(node, path,
                 std::string(pluginKindName(kind)) + " plugin '" + ref.plugin + "' not found" +
                     (hint.empty() ? "" : " (did you mean '" + hint + "'?)") +
                     "; available: " + (list.empty() ? "none" : list) + "; searched: " + registry.describeSearched() +
                     ". Check plugin_path / COMMHOST_PLUGIN_PATH, or run `commhost plugins list -c CONFIG`");
    return ref;
  }
  if (!entry->descriptor) {
    warnings.push_back(path + ": plugin '" + ref.plugin + "' is unavailable (" + entry->unavailable +
                       "); its options are not checked and using it is an error");
    return ref;
  }
  if (entry->descriptor->kind != kind) {
    problems.add(node, path,
                 "plugin '" + ref.plugin + "' is a " + pluginKindName(entry->descriptor->kind) + " plugin, not a " +
                     pluginKindName(kind) + " plugin");
    return ref;
  }
  if (!entry->unavailable.empty()) warnings.push_back(unavailableHere(path, ref.plugin, entry->unavailable, kind));
  const size_t problemsBefore = problems.count();
  ref.options = config::validateOptions(options, path + ".options", entry->descriptor->options, problems);
  // The plugin's own check (checkOptions), of options that passed their specs, where it can run.
  if (problems.count() == problemsBefore && entry->unavailable.empty() && hasOptionCheck(*entry->descriptor)) {
    std::string why;
    try {
      why = entry->descriptor->checkOptions(ref.options);
    } catch (const std::exception& e) {
      why = std::string("the plugin's option check failed: ") + e.what();
    }
    if (!why.empty()) problems.add(options.IsDefined() ? options : node, path + ".options", why);
  }
  if (wrap.IsDefined()) ref.wrap = resolveWrap(wrap, path + ".wrap", ref.plugin, registry, problems);
  return ref;
}

// An entry of backends: or hooks: is NAME: { plugin, options } (or NAME: with nothing).
// A plain value there is almost always an option that lost its indentation and became an
// entry of its own, such as a backend named `plugin`.
bool entryShapeOk(const std::pair<YAML::Node, YAML::Node>& kv, const std::string& table, Problems& problems) {
  if (!kv.first.IsScalar() || kv.first.Scalar().empty()) {
    problems.add(kv.first, table, "an entry's name must be a plain word");
    return false;
  }
  const std::string name = kv.first.Scalar();
  const YAML::Node& value = kv.second;
  if (value.IsNull() || value.IsMap()) return true;
  const bool optionKey = name == "plugin" || name == "options";
  const std::string fix = optionKey
                              ? "'" + name + "' looks like a setting of the entry above: indent it under that entry"
                              : "write " + name +
                                    ": { plugin: " + (value.IsScalar() ? value.Scalar() : std::string("NAME")) + " }";
  problems.add(kv.first, table + "." + name,
               std::string("expected { plugin: NAME, options: {...} }, got a ") +
                   (value.IsSequence() ? "list" : "plain value") + "; " + fix);
  return false;
}

YAML::Node pluginRefYaml(const PluginRef& ref) {
  YAML::Node n(YAML::NodeType::Map);
  n["plugin"] = ref.plugin;
  // Secrets never reach printed configs (config check output ends up in CI logs).
  OptionValues shown = ref.options;
  for (const auto& [key, value] : ref.options.all())
    if (config::isSecretKey(key) && std::holds_alternative<std::string>(value) && !std::get<std::string>(value).empty())
      shown.set(key, std::string("<redacted>"));
  YAML::Node options = config::toYaml(shown);
  if (options.size()) n["options"] = options;
  if (!ref.wrap.empty()) n["wrap"] = ref.wrap;
  return n;
}

std::string effectiveYaml(const Config& cfg) {
  YAML::Node root = config::toYaml(cfg.host);
  root["store"] = pluginRefYaml(cfg.store);
  for (const auto& [name, ref] : cfg.backends) root["backends"][name] = pluginRefYaml(ref);
  YAML::Node routes(YAML::NodeType::Sequence);
  for (const auto& r : cfg.routes) routes.push_back(config::routeYaml(r));
  root["routes"] = routes;
  for (const auto& [name, ref] : cfg.hooks) root["hooks"][name] = pluginRefYaml(ref);
  if (cfg.tuner) root["tuner"] = pluginRefYaml(*cfg.tuner);
  YAML::Emitter out;
  out << root;
  return std::string(out.c_str()) + "\n";
}

// The hash stands for what every rank must agree on, so it leaves out what is per host:
// where this rank writes its dumps (by default under its own TMPDIR). Otherwise hosts
// whose TMPDIR differ, or a dump_dir set per host, would refuse to form one job. And what
// is per process: group.join, set for a restarted rank only.
uint64_t agreedHash(const Config& cfg) {
  Config agreed = cfg;
  if (agreed.host.has(kDumpDirKey)) agreed.host.set(kDumpDirKey, std::string());
  if (agreed.host.has(kJoinKey)) agreed.host.set(kJoinKey, false);
  return fnv1a(effectiveYaml(agreed));
}

// Whether a top-level key is there with a value (`tuner:` alone, or null, is not).
bool isSet(const YAML::Node& node) { return node.IsDefined() && !node.IsNull(); }

// The plugin used by an entry of store:, backends: or hooks: (before it is checked).
std::string pluginOf(const YAML::Node& entry, const std::string& fallback) {
  if (entry.IsScalar()) return entry.Scalar();
  const YAML::Node plugin = entry.IsMap() ? child(entry, "plugin") : YAML::Node(YAML::NodeType::Undefined);
  return plugin.IsScalar() ? plugin.Scalar() : fallback;
}

// Every plugin the config names (store, backends, hooks and their wrappers), defaults
// included: what a job opens (PluginRegistry::scanFor).
std::vector<std::string> pluginsNamed(const YAML::Node& root) {
  std::vector<std::string> names{pluginOf(child(root, "store"), "tcp")};
  if (isSet(child(root, "tuner"))) names.push_back(pluginOf(child(root, "tuner"), ""));
  for (const char* table : {"backends", "hooks"}) {
    const YAML::Node entries = child(root, table);
    if (!entries.IsMap()) continue;
    for (const auto& kv : entries) {
      if (!kv.first.IsScalar()) continue;
      names.push_back(pluginOf(kv.second, kv.first.Scalar()));
      const YAML::Node wrap = kv.second.IsMap() ? child(kv.second, "wrap") : YAML::Node(YAML::NodeType::Undefined);
      if (wrap.IsScalar()) names.push_back(wrap.Scalar());
    }
  }
  return names;
}

// Every plugin option of this config as its full dotted key (backends.gloo.options.threads),
// for COMMHOST_ variables. Entries whose name has a dot cannot be addressed by a dotted
// key (nor by --set) and are left out.
std::vector<std::string> pluginOptionKeys(const YAML::Node& root, const PluginRegistry& registry) {
  std::vector<std::string> keys;
  auto add = [&](const std::string& prefix, const std::string& plugin) {
    const PluginEntry* e = registry.find(plugin);
    if (!e || !e->descriptor) return;
    for (const auto& spec : e->descriptor->options) keys.push_back(prefix + ".options." + spec.key);
  };
  add("store", pluginOf(child(root, "store"), "tcp"));
  if (isSet(child(root, "tuner"))) add("tuner", pluginOf(child(root, "tuner"), ""));
  for (const char* table : {"backends", "hooks"}) {
    const YAML::Node entries = child(root, table);
    if (!entries.IsMap()) continue;
    for (const auto& kv : entries) {
      if (!kv.first.IsScalar() || kv.first.Scalar().find('.') != std::string::npos) continue;
      add(std::string(table) + "." + kv.first.Scalar(), pluginOf(kv.second, kv.first.Scalar()));
    }
  }
  return keys;
}

// plugin_path as folders. A relative entry of a config file is relative to that file's
// folder, so a config shipped beside its plugins works from any working directory; one
// from an override (--set, COMMHOST_OVERRIDES) or from text with no file is relative to
// the working directory, as a path on a command line is. A folder that does not exist is
// a warning with the entry's place: the search goes on without it.
std::vector<std::string> pluginDirs(const YAML::Node& root, const std::vector<std::string>& list,
                                    const std::string& baseDir, const Problems& problems,
                                    std::vector<std::string>& warnings) {
  const YAML::Node node = child(root, "plugin_path");
  const bool fromFile = !baseDir.empty() && !problems.overridden("plugin_path");
  std::vector<std::string> dirs;
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node item = node.IsSequence() && i < node.size() ? YAML::Node(node[i]) : node;
    std::string dir = list[i];
    if (fromFile && !dir.empty() && dir[0] != '/')
      dir = (std::filesystem::path(baseDir) / dir).lexically_normal().string();
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      warnings.push_back(problems.where(item, "plugin_path") + ": plugin_path folder " + escaped(dir) +
                         (dir == list[i] ? "" : " ('" + escaped(list[i]) + "' relative to the config's folder)") +
                         " does not exist; no plugins are loaded from it. Fix or remove the entry");
    dirs.push_back(dir);
  }
  return dirs;
}

// The folder relative plugin_path entries of the config file `path` are taken from.
std::string folderOf(const std::string& path) {
  std::error_code ec;
  const auto abs = std::filesystem::absolute(path, ec);
  return (ec ? std::filesystem::path(path) : abs).lexically_normal().parent_path().string();
}

// A config file's text; a directory, an oversized file and an unreadable one are refused.
std::string readConfigFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode))
      throw ConfigError("config '" + escaped(path) + "' is a directory; give a YAML file, e.g. " + escaped(path) +
                        "/default.yaml (-c / COMMHOST_CONFIG)");
    if (S_ISREG(st.st_mode) && static_cast<size_t>(st.st_size) > kMaxConfigBytes)
      throw ConfigError(tooBig(escaped(path), static_cast<size_t>(st.st_size)));
  }
  std::ifstream in(path);
  if (!in) {
    // A bare name that is no file is looked up among the installed configs: list them.
    std::string names;
    std::error_code ec;
    for (const auto& f : std::filesystem::directory_iterator(installedConfigDir(), ec))
      if (f.path().extension() == ".yaml") names += (names.empty() ? "" : ", ") + f.path().stem().string();
    throw ConfigError("cannot read config file '" + escaped(path) + "'; check the path (-c / COMMHOST_CONFIG)" +
                      (names.empty() ? std::string() : ", or name an installed config: " + names));
  }
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// COMMHOST_STORE_TOKEN keeps the secret out of config files; it fills the store's
// auth_token (when the store plugin has one) unless --set gave it explicitly.
void applyStoreToken(PluginRef& store, const PluginRegistry& registry, const ConfigOverrides& overrides) {
  if (!overrides.fromEnvironment) return;
  const auto token = config::readEnv("COMMHOST_STORE_TOKEN");
  if (!token) return;
  for (const auto& s : overrides.set)
    if (s.rfind("store.options.auth_token=", 0) == 0) return;
  const PluginEntry* e = registry.find(store.plugin);
  if (!e || !e->descriptor) return;
  for (const auto& spec : e->descriptor->options)
    if (std::string(spec.key) == "auth_token") store.options.set("auth_token", *token);
}

}  // namespace

namespace {

// The text as a YAML map, or a ConfigError: too big, not UTF-8, not YAML, not a map.
// Duplicate keys are problems, reported with the rest.
YAML::Node parseYaml(const std::string& text, const std::string& source, Problems& problems) {
  if (text.size() > kMaxConfigBytes) throw ConfigError(tooBig(source, text.size()));
  // Names end up in store keys and log lines: bytes that are not UTF-8 (which YAML
  // requires anyway) are refused here, and shown escaped rather than echoed raw.
  if (const size_t bad = invalidUtf8At(text); bad != std::string::npos) {
    const size_t lineStart = text.rfind('\n', bad) == std::string::npos ? 0 : text.rfind('\n', bad) + 1;
    const size_t line = std::count(text.begin(), text.begin() + bad, '\n') + 1;
    throw ConfigError("config " + source + ":" + std::to_string(line) + ":" + std::to_string(bad - lineStart + 1) +
                      ": not valid UTF-8 (bytes " + escaped(text.substr(bad, 4)) +
                      "); YAML files must be UTF-8: re-save the file as UTF-8");
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp reports no place here, only its recursion depth.
    throw ConfigError("config " + source + ": nesting too deep: the YAML parser stopped at depth " +
                      std::to_string(e.depth()) +
                      ", its limit (a commhost config nests a few levels); is this the "
                      "right file?");
  } catch (const YAML::ParserException& e) {
    throwParseError(e, text, source);
  }
  if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap()) {
    problems.add(root, "", "the config must be a map of settings (group, backends, routes, ...)");
    problems.throwIfAny();
  }
  checkDuplicateKeys(root, problems);
  return root;
}

// The host's keys (everything but the plugin tables), checked against configSchema().
OptionValues parseHostKeys(const YAML::Node& root, Problems& problems) {
  YAML::Node hostKeys(YAML::NodeType::Map);
  const auto known = topLevelNames();
  for (const auto& kv : root) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
    if (std::find(kTables.begin(), kTables.end(), key) != kTables.end()) continue;
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      if (problems.full()) {  // past the shown problems only the count matters
        problems.tally();
        continue;
      }
      const std::string hint = closestMatch(key, known);
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      problems.add(kv.first, key,
                   "unknown key" + (hint.empty() ? "" : " (did you mean '" + hint + "'?)") +
                       "; allowed at the top level: " + list);
      continue;
    }
    hostKeys[key] = kv.second;
  }
  OptionValues host = config::validateOptions(hostKeys, "", configSchema(), problems);
  if (host.has(kDumpDirKey) && host.getString(kDumpDirKey).empty()) host.set(kDumpDirKey, config::defaultDumpDir());
  return host;
}

// Each entry of `table` (backends or hooks) as a PluginRef; `required`: at least one.
void parsePluginTable(const YAML::Node& root, const char* table, PluginKind kind, bool required,
                      const PluginRegistry& registry, Problems& problems, std::map<std::string, PluginRef>& out,
                      std::vector<std::string>& warnings) {
  const YAML::Node entries = child(root, table);
  if (entries.IsMap() && (entries.size() || !required)) {
    for (const auto& kv : entries) {
      if (!entryShapeOk(kv, table, problems)) continue;
      const std::string name = kv.first.Scalar();
      out[name] = parsePluginRef(kv.second, std::string(table) + "." + name, name, kind, registry, problems, warnings);
    }
  } else if (entries.IsDefined() && !entries.IsNull() && !entries.IsMap()) {
    problems.add(entries, table,
                 required ? "expected a map of name: { plugin, options }, e.g. backends: { self: {} }"
                          : "expected a map of name: { plugin, options }");
  } else if (required) {
    problems.add(entries.IsDefined() ? entries : root, table,
                 "configure at least one backend, e.g. backends: { self: { plugin: self } }");
  }
}

// routes:, then the route table they make with the config's backends. The table is
// checked even when other keys had problems, so one pass reports everything; a route
// dropped for its own problem leaves holes that are not problems of their own.
void parseAndCheckRoutes(const YAML::Node& root, Config& cfg, const PluginRegistry& registry, Problems& problems) {
  const YAML::Node routes = child(root, "routes");
  config::parseRoutes(routes, cfg, problems);
  const bool routeDropped = routes.IsSequence() && cfg.routes.size() != routes.size();
  if (cfg.routes.empty()) {
    if (!routeDropped)
      problems.add(root, "routes", "no routes: add at least one, e.g. routes: [{ device: cpu, backend: NAME }]");
    return;
  }
  for (const RouteProblem& p : RouteTable::problemsOf(cfg, registry)) {
    if (routeDropped && p.uncovered) continue;
    problems.addAt(p.where.empty() ? cfg.source : p.where, p.message);
  }
}

// parse -> open the plugins it names -> validate plugin entries and routes against them.
// `baseDir`: the folder of the config file ("" for text with no file).
Config loadConfig(const std::string& text, const std::string& source, const std::string& baseDir,
                  PluginRegistry& registry, const ConfigOverrides& overrides) {
  Config cfg;
  cfg.source = source;
  Problems problems(source);
  YAML::Node root = parseYaml(text, source, problems);
  const config::AppliedOverrides applied = config::applyOverrides(root, overrides, problems);
  const YAML::Node& view = root;  // const lookups never insert keys
  cfg.host = parseHostKeys(view, problems);

  registry.scanFor(
      PluginRegistry::searchPath(pluginDirs(view, cfg.host.getList("plugin_path"), baseDir, problems, cfg.warnings)),
      pluginsNamed(view));
  // Plugin options from the environment need the plugins' schemas: applied only now.
  config::applyPluginEnvironment(root, applied, pluginOptionKeys(view, registry), problems, cfg.warnings);

  // No store: the embedded tcp store (rank 0 serves it), as in the default config, so a
  // multi-rank job works; `hash` must be asked for.
  cfg.store = parsePluginRef(child(view, "store"), "store", "tcp", PluginKind::Store, registry, problems, cfg.warnings);
  applyStoreToken(cfg.store, registry, overrides);
  parsePluginTable(view, "backends", PluginKind::Backend, true, registry, problems, cfg.backends, cfg.warnings);
  parsePluginTable(view, "hooks", PluginKind::CommHook, false, registry, problems, cfg.hooks, cfg.warnings);
  // No tuner unless one is named: the routes' own order.
  if (isSet(child(view, "tuner")))
    cfg.tuner = parsePluginRef(child(view, "tuner"), "tuner", "", PluginKind::Tuner, registry, problems, cfg.warnings);
  parseAndCheckRoutes(view, cfg, registry, problems);
  problems.throwIfAny();

  cfg.effectiveYaml = effectiveYaml(cfg);
  cfg.hash = agreedHash(cfg);
  return cfg;
}

}  // namespace

Config loadConfigText(const std::string& text, const std::string& source, PluginRegistry& registry,
                      const ConfigOverrides& overrides) {
  return loadConfig(text, source, "", registry, overrides);
}

OptionValues resolveOptions(const std::vector<OptionSpec>& specs, const std::map<std::string, std::string>& values,
                            const std::string& where) {
  Problems problems(where);
  YAML::Node node(YAML::NodeType::Map);
  for (const auto& [key, text] : values) {
    try {
      // Empty text means an empty string, not YAML's null.
      node[key] = text.empty() ? YAML::Node(std::string()) : YAML::Load(text);
    } catch (const YAML::Exception&) {
      node[key] = text;
    }
  }
  OptionValues out = config::validateOptions(node, "", specs, problems);
  problems.throwIfAny();
  return out;
}

std::string installedConfigDir() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path installed = fs::path(libcommhostDirectory()) / COMMHOST_CONFIGS_FROM_LIBDIR;
  if (fs::is_directory(installed, ec)) return fs::weakly_canonical(installed, ec).string();
  return COMMHOST_SOURCE_CONFIGS;  // a build tree: libcommhost in build/lib, configs in the source
}

std::string resolveConfigPath(const std::string& nameOrPath) {
  struct stat st {};
  if (nameOrPath.empty() || nameOrPath.find('/') != std::string::npos || ::stat(nameOrPath.c_str(), &st) == 0)
    return nameOrPath;
  const bool hasSuffix = nameOrPath.size() > 5 && nameOrPath.compare(nameOrPath.size() - 5, 5, ".yaml") == 0;
  const std::string candidate = installedConfigDir() + "/" + nameOrPath + (hasSuffix ? "" : ".yaml");
  return ::stat(candidate.c_str(), &st) == 0 ? candidate : nameOrPath;
}

Config loadConfigFile(const std::string& path, PluginRegistry& registry, const ConfigOverrides& overrides) {
  const std::string file = resolveConfigPath(path);
  return loadConfig(readConfigFile(file), file, folderOf(file), registry, overrides);
}

Config loadConfigOrDefault(const std::string& path, PluginRegistry& registry, const ConfigOverrides& overrides) {
  if (path.empty()) return loadConfigText(defaultConfigText(), "<embedded default>", registry, overrides);
  if (const auto launched = config::launchConfigText(path))
    return loadConfig(*launched, path, folderOf(path), registry, overrides);
  return loadConfigFile(path, registry, overrides);
}

std::vector<std::string> configPluginPath(const std::string& given, std::vector<std::string>& warnings) {
  const std::string path = resolveConfigPath(given);
  const std::string text = readConfigFile(path);
  Problems problems(path);
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throwParseError(e, text, path);
  }
  const YAML::Node node = root.IsMap() ? child(root, "plugin_path") : YAML::Node(YAML::NodeType::Undefined);
  std::vector<std::string> list;
  if (node.IsDefined()) {
    for (const auto& spec : configSchema())
      if (std::string(spec.key) == "plugin_path") {
        try {
          list = std::get<std::vector<std::string>>(config::parseOptionValue(spec, node));
        } catch (const Error& e) {
          problems.add(node, "plugin_path", e.what());
        }
      }
  }
  problems.throwIfAny();
  return pluginDirs(root, list, folderOf(path), problems, warnings);
}

std::string configPathFromEnvironment() { return config::readEnv("COMMHOST_CONFIG").value_or(""); }

}  // namespace commhost
