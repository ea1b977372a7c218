// SPDX-License-Identifier: Apache-2.0
// Internal: the config's routes: entries (RouteSpec in commhost/config.h), read from YAML
// and written back for the effective config. The route table they make is checked
// apart, by the dispatcher (RouteTable::problemsOf).
#pragma once

#include <yaml-cpp/yaml.h>

#include "commhost/config.h"
#include "yaml_options.h"

namespace commhost::config {

// routes: into cfg.routes (whose backends are already parsed): each entry's keys, and
// what it names against cfg.backends. An entry with a problem is reported and left out.
void parseRoutes(const YAML::Node& node, Config& cfg, Problems& problems);

// One route as the effective config writes it: the keys it sets, defaults of a shadow
// included.
YAML::Node routeYaml(const RouteSpec& route);

}  // namespace commhost::config
