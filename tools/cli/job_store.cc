// SPDX-License-Identifier: Apache-2.0
#include "job_store.h"

#include <algorithm>

#include "commhost/errors.h"
#include "commhost/logging.h"

namespace commhost::cli {
OptionValues clientStoreOptions(const PluginDescriptor& d, OptionValues options, std::chrono::milliseconds timeout) {
  for (const auto& spec : d.options) {
    const std::string key = spec.key;
    if (key == "serve") options.set("serve", std::string("never"));
    if (key == "timeout" && spec.type == OptionType::Duration)
      options.set("timeout", std::min(options.getDuration("timeout"), timeout));
  }
  return options;
}

std::shared_ptr<Store> connectMaster(const std::string& master, const std::string& token,
                                     const std::vector<std::string>& pluginPaths, std::chrono::milliseconds timeout,
                                     const std::string& who) {
  const size_t colon = master.rfind(':');
  if (colon == std::string::npos || colon == 0)
    throw InvalidArgument("--master " + master + ": want HOST:PORT of the job's store (MASTER_ADDR:MASTER_PORT)");
  PluginRegistry registry;
  registry.scan(PluginRegistry::searchPath(pluginPaths));
  const PluginEntry& tcp = registry.require("tcp", PluginKind::Store);
  const OptionValues options = resolveOptions(tcp.descriptor->options,
                                              {{"serve", "never"},
                                               {"host", master.substr(0, colon)},
                                               {"port", master.substr(colon + 1)},
                                               {"auth_token", token},
                                               {"timeout", std::to_string(timeout.count()) + "ms"}},
                                              who);
  StoreContext ctx;
  ctx.rank = -1;
  ctx.timeout = timeout;
  ctx.logger = std::make_shared<Logger>("commhost.tcp", who);
  try {
    return tcp.descriptor->createStore(options, ctx);
  } catch (const StoreError& e) {
    // Whatever went wrong: say the likeliest other cause too.
    throw StoreError(
        std::string(e.what()) +
        ". If this is a torch job, its store (MASTER_ADDR:MASTER_PORT) is torch's TCPStore, which "
        "this command cannot talk to: give the commhost config a tcp store of its own (store: {plugin: "
        "tcp}); for a flight-recorder dump, send SIGUSR1 to `commhost run` (it passes it to every rank) or to "
        "each rank's process");
  }
}

std::shared_ptr<Store> connectConfigStore(const Config& config, const PluginRegistry& registry,
                                          const std::string& masterAddr, int masterPort, int worldSize,
                                          std::chrono::milliseconds timeout, const std::string& who) {
  const PluginEntry& entry = registry.require(config.store.plugin, PluginKind::Store);
  StoreContext ctx;
  ctx.rank = -1;
  ctx.worldSize = worldSize;
  ctx.masterAddr = masterAddr;
  ctx.masterPort = masterPort;
  ctx.timeout = std::min(config.timeout(), timeout);
  ctx.logger = std::make_shared<Logger>("commhost." + config.store.plugin, who);
  return entry.descriptor->createStore(clientStoreOptions(*entry.descriptor, config.store.options, timeout), ctx);
}

}  // namespace commhost::cli
