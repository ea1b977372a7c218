// SPDX-License-Identifier: Apache-2.0
// Internal: applying --set and COMMHOST_<KEY> overrides to a parsed config tree.
#pragma once

#include <string>
#include <vector>

#include "commhost/config.h"
#include "yaml_options.h"

namespace commhost::config {

// Environment first, then each --set in order, so the command line wins. Overridden
// paths are noted in `problems` so errors cite the override. Unknown COMMHOST_
// variables become warnings.
void applyOverrides(YAML::Node& root, const ConfigOverrides& overrides, Problems& problems,
                    std::vector<std::string>& warnings);

}  // namespace commhost::config
