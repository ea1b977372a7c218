// SPDX-License-Identifier: Apache-2.0
#include "features.h"

#include "commhost/dispatcher.h"

namespace commhost {
namespace {
bool listedByRoute(const Config& config, const std::string& backend) {
  for (const RouteSpec& r : config.routes)
    for (const auto& name : r.backends())
      if (name == backend) return true;
  return false;
}
}  // namespace

// Only these features are checked: the host can tell when a group is a subgroup and how
// the job was launched, but not whether a backend really cancels transfers or coalesces
// (those flags were removed in ABI 2 for that reason).
void requireFeature(const Config& config, const PluginRegistry& registry, Feature feature, const ErrorContext& where,
                    const std::string& need, const std::string& next) {
  const RouteTable routes = RouteTable::forConfig(config, registry);
  int index = -1;
  for (const auto& [backendName, ref] : config.backends) {
    // Never created (see createBackends). With a tuner, any backend a route lists may be
    // chosen for some size: each is checked (the tuned table needs the group).
    if (!routes.uses(++index) && !(config.tuner && listedByRoute(config, backendName))) continue;
    const PluginEntry* e = registry.find(ref.plugin);
    if (!e || !e->usable() || e->descriptor->kind != PluginKind::Backend) continue;
    if (e->descriptor->capabilities.features.has(feature)) continue;
    raise(ErrorCode::Config, where,
          "backend '" + backendName + "' (plugin " + ref.plugin + ", configured at " + ref.where +
              ") does not declare feature " + featureName(feature) + ", which " + need,
          next);
  }
}

void checkLaunchFeatures(const Config& config, const PluginRegistry& registry, const LaunchInfo& launch) {
  if (launch.worldSize <= 1) return;
  ErrorContext where;
  where.rank = launch.rank;
  const std::string ranks = std::to_string(launch.worldSize);
  requireFeature(config, registry, Feature::MultiProcess, where,
                 "this job needs: its " + ranks + " ranks are separate processes (launcher: " + launch.launcher + ")",
                 "Route this job's ops to a backend that serves separate processes (e.g. gloo), or remove it "
                 "from the config's backends");
  if (launch.localWorldSize < launch.worldSize)
    requireFeature(config, registry, Feature::MultiHost, where,
                   "this job needs: its " + ranks + " ranks span hosts (" + std::to_string(launch.localWorldSize) +
                       " on this host, LOCAL_WORLD_SIZE < WORLD_SIZE)",
                   "Route this job's ops to a multi-host backend (e.g. gloo), remove it from the config's backends, "
                   "or run every rank on one host");
}

}  // namespace commhost
