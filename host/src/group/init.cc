// SPDX-License-Identifier: Apache-2.0
#include "commhost/errors.h"
#include "commhost/process_group.h"
#include "commhost/sdk/launch_report.h"
#include "features.h"

namespace commhost {

namespace {

// Everything init() does before the world group: the config, the store, the launch checks.
ProcessGroup::Setup prepareWorld(const InitOptions& options) {
  const LaunchInfo launch = detectLaunch();
  auto registry = std::make_shared<PluginRegistry>();
  const std::string path = options.configPath.empty() ? launch.configPath : options.configPath;
  auto config = std::make_shared<Config>(loadConfigOrDefault(path, *registry, options.overrides));
  Logger::setLevel(parseLogLevel(config->host.getString("logging.level")));
  auto logger = std::make_shared<Logger>("commhost", "rank " + std::to_string(launch.rank));
  for (const auto& w : config->warnings) logger->warn(w);

  const PluginEntry& entry = registry->require(config->store.plugin, PluginKind::Store);
  StoreContext ctx;
  ctx.rank = launch.rank;
  ctx.worldSize = launch.worldSize;
  ctx.masterAddr = launch.masterAddr;
  ctx.masterPort = launch.masterPort;
  ctx.timeout = config->timeout();
  ctx.logger = std::make_shared<Logger>("commhost." + config->store.plugin, "rank " + std::to_string(launch.rank));
  ctx.reportLaunch = launchReporter();
  StorePtr store;
  try {
    store = entry.descriptor->createStore(config->store.options, ctx);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    ErrorContext where;
    where.rank = launch.rank;
    raise(ErrorCode::Store, where, "store plugin '" + config->store.plugin + "' failed to start: " + e.what(),
          "Check the store options at " + config->store.where);
  }
  // Keep the plugin's code loaded for as long as the store lives.
  auto holder = std::make_shared<std::pair<std::shared_ptr<void>, StorePtr>>(entry.library, store);
  StorePtr kept(holder, holder->second.get());

  // After the store: a rank that cannot reach it says so first, as it always has.
  checkLaunchFeatures(*config, *registry, launch);

  ProcessGroup::Setup setup;
  setup.config = config;
  setup.registry = registry;
  setup.store = kept;
  setup.rank = launch.rank;
  setup.worldSize = launch.worldSize;
  setup.localWorldSize = launch.localWorldSize;
  setup.overrides = options.overrides;
  return setup;
}

}  // namespace

std::shared_ptr<ProcessGroup> init(const InitOptions& options) {
  ProcessGroup::Setup setup;
  try {
    setup = prepareWorld(options);
  } catch (const std::exception& e) {
    reportLaunchFailure(e, "init");  // `commhost run` names it in its summary
    throw;
  }
  return ProcessGroup::create(std::move(setup));  // reports Joined, or why not
}

}  // namespace commhost
