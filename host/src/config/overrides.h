// SPDX-License-Identifier: Apache-2.0
// Internal: applying --set and COMMHOST_<KEY> overrides to a parsed config tree.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "commhost/config.h"
#include "yaml_options.h"

namespace commhost::config {

// What applyOverrides leaves for applyPluginEnvironment.
struct AppliedOverrides {
  std::vector<std::pair<std::string, std::string>> unmatched;  // COMMHOST_ variables that are no host key
  std::vector<std::string> setPaths;                           // keys a --set (or COMMHOST_OVERRIDES) gave
};

// Host-key variables first, then each --set in order, so the command line wins.
// Overridden paths are noted in `problems` so errors cite the override.
AppliedOverrides applyOverrides(YAML::Node& root, const ConfigOverrides& overrides, Problems& problems);

// The variables applyOverrides left that set a plugin option: `optionKeys` are the dotted
// keys the config's plugins declare (store.options.K, backends.NAME.options.K,
// hooks.NAME.options.K), known once the plugins are loaded. A --set of the same key
// wins. A variable that names two keys (backends `a-b` and `a_b`) is an error; one that
// names none is a warning, as an unknown COMMHOST_ variable always was.
void applyPluginEnvironment(YAML::Node& root, const AppliedOverrides& applied,
                            const std::vector<std::string>& optionKeys, Problems& problems,
                            std::vector<std::string>& warnings);

}  // namespace commhost::config
