// SPDX-License-Identifier: Apache-2.0
// --set key=value and COMMHOST_<KEY> overrides, applied to the YAML tree before it is
// validated so they get exactly the checks a value in the file gets.
#include "overrides.h"

#include <algorithm>
#include <map>

#include "commhost/config.h"
#include "environment.h"

namespace commhost::config {
namespace {

// Sets `dotted` in `root` to `value`, creating maps on the way.
// NOLINTNEXTLINE(performance-unnecessary-value-param): a YAML::Node is a handle, copied on purpose
bool setPath(YAML::Node root, const std::string& dotted, const YAML::Node& value, std::string& error) {
  YAML::Node cur = root;
  size_t start = 0;
  while (true) {
    const size_t dot = dotted.find('.', start);
    const std::string part = dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (part.empty()) {
      error = "empty key segment";
      return false;
    }
    if (dot == std::string::npos) {
      cur[part] = value;
      return true;
    }
    YAML::Node next = cur[part];
    if (!next.IsDefined() || next.IsNull()) {
      cur[part] = YAML::Node(YAML::NodeType::Map);
      next.reset(cur[part]);
    } else if (!next.IsMap()) {
      const std::string prefix = dotted.substr(0, dot);
      error = "'" + prefix + "' is not a map";
      // `store: tcp` is shorthand for { plugin: tcp }: say how to make room for options.
      if (next.IsScalar())
        error += " but the plain value '" + next.Scalar() + "', so nothing can be set under it; write it as a map " +
                 "in the config (e.g. " + prefix + ": { plugin: " + next.Scalar() + " })";
      return false;
    }
    cur.reset(next);
    start = dot + 1;
  }
}

YAML::Node parseValue(const std::string& text) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception&) {
    return YAML::Node(text);  // not YAML: take it as a plain string
  }
}

void apply(YAML::Node& root, const std::string& key, const YAML::Node& value, const std::string& origin,
           Problems& problems) {
  std::string error;
  if (!setPath(root, key, value, error)) {
    problems.addAt(origin, error);
    return;
  }
  problems.noteOverride(key, origin);
}

// A variable's value as the origin messages quote: secrets hidden, other bytes escaped.
std::string variableOrigin(const std::string& name, const std::string& value) {
  return escaped(redactAssignment(name + "=" + value));
}

}  // namespace

AppliedOverrides applyOverrides(YAML::Node& root, const ConfigOverrides& overrides, Problems& problems) {
  AppliedOverrides applied;
  if (overrides.fromEnvironment) {
    for (const auto& [name, value] : commhostVariables()) {
      if (isReservedVariable(name)) continue;
      const OptionSpec* match = nullptr;
      for (const auto& spec : configSchema())
        if (variableForKey(spec.key) == name && std::string(spec.key) != "plugin_path") match = &spec;
      if (!match) {
        applied.unmatched.emplace_back(name, value);  // a plugin option, or unknown: seen once plugins load
        continue;
      }
      const std::string origin = variableOrigin(name, value);
      if (invalidUtf8At(value) != std::string::npos) {
        problems.addAt(origin, "not valid UTF-8; values must be UTF-8 text");
        continue;
      }
      apply(root, match->key, YAML::Node(value), origin, problems);
    }
  }
  // Origins are quoted in messages: a secret's value is hidden there (config check output
  // ends up in CI logs), and bytes that are not UTF-8 are refused, shown escaped.
  auto applySet = [&](const std::string& assignment, const std::string& suffix) {
    const std::string origin = "--set " + escaped(redactAssignment(assignment)) + suffix;
    const size_t eq = assignment.find('=');
    if (eq == std::string::npos || eq == 0) {
      problems.addAt(origin, "expected key=value, e.g. --set group.timeout=10s");
      return;
    }
    if (invalidUtf8At(assignment) != std::string::npos) {
      problems.addAt(origin, "not valid UTF-8; keys and values must be UTF-8 text");
      return;
    }
    applied.setPaths.push_back(assignment.substr(0, eq));
    apply(root, assignment.substr(0, eq), parseValue(assignment.substr(eq + 1)), origin, problems);
  };
  if (overrides.fromEnvironment)
    for (const auto& assignment : overridesFromEnv()) applySet(assignment, " (from commhost run)");
  for (const auto& assignment : overrides.set) applySet(assignment, "");
  return applied;
}

void applyPluginEnvironment(YAML::Node& root, const AppliedOverrides& applied,
                            const std::vector<std::string>& optionKeys, Problems& problems,
                            std::vector<std::string>& warnings) {
  if (applied.unmatched.empty()) return;
  std::map<std::string, std::vector<std::string>> keysOf;  // variable -> the keys it would set
  for (const auto& key : optionKeys) {
    auto& keys = keysOf[variableForKey(key)];
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  }
  for (const auto& [name, value] : applied.unmatched) {
    const auto it = keysOf.find(name);
    if (it == keysOf.end()) {
      std::vector<std::string> known;
      for (const auto& spec : configSchema()) known.push_back(variableForKey(spec.key));
      for (const auto& [variable, keys] : keysOf) known.push_back(variable);
      const std::string hint = closestMatch(name, known);
      const std::string did = hint.empty() ? "" : " (did you mean " + hint + "?)";
      // Shaped like a plugin option: the entry's plugin may simply not have loaded, in
      // which case it has no options to match, and "not a setting" would mislead.
      const bool pluginShaped = name.find("_OPTIONS_") != std::string::npos &&
                                (name.rfind("COMMHOST_BACKENDS_", 0) == 0 || name.rfind("COMMHOST_STORE_", 0) == 0 ||
                                 name.rfind("COMMHOST_HOOKS_", 0) == 0);
      warnings.push_back(
          pluginShaped ? "environment variable " + name + " names no option of a loaded plugin and is ignored" + did +
                             "; check the entry's name and option, and that its plugin loaded "
                             "(commhost plugins list -c CONFIG)"
                       : "environment variable " + name + " is not a commhost setting and is ignored" + did);
      continue;
    }
    const std::string origin = variableOrigin(name, value);
    if (it->second.size() > 1) {
      std::string keys;
      for (const auto& k : it->second) keys += (keys.empty() ? "" : " and ") + k;
      problems.addAt(origin, "ambiguous: it would set " + keys +
                                 " (a variable is its key upper-cased, every character but letters and digits "
                                 "as '_'); rename one of those entries, or use --set KEY=VALUE instead");
      continue;
    }
    const std::string& key = it->second.front();
    const bool setByCommandLine = std::any_of(applied.setPaths.begin(), applied.setPaths.end(),
                                              [&](const auto& p) { return key == p || key.rfind(p + ".", 0) == 0; });
    if (setByCommandLine) continue;  // --set wins over the environment, as for host keys
    if (invalidUtf8At(value) != std::string::npos) {
      problems.addAt(origin, "not valid UTF-8; values must be UTF-8 text");
      continue;
    }
    apply(root, key, YAML::Node(value), origin, problems);
  }
}

}  // namespace commhost::config
