// SPDX-License-Identifier: Apache-2.0
#include "job_store.h"

#include <algorithm>
#include <map>

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

void addJobStoreOptions(CLI::App* cmd, JobStoreArgs& a, bool masterRequired) {
  auto* master = cmd->add_option(
      "--master", a.master,
      std::string("HOST:PORT of the job's store") + (masterRequired ? "" : " (default: MASTER_ADDR:MASTER_PORT)"));
  if (masterRequired) master->required();
  cmd->add_option("--token", a.token, "The tcp store's auth token, if it has one");
  cmd->add_option("--store", a.store,
                  "The store's kind: tcp (commhost's own, as `commhost run` starts) or torch_tcp (torch's TCPStore, "
                  "for a torchrun or env:// job on the torch bridge)")
      ->check(CLI::IsMember({"tcp", "torch_tcp"}))
      ->capture_default_str();
  cmd->add_option("--plugin-path", a.pluginPaths, "Extra directories to search for the store plugin");
}

std::shared_ptr<Store> connectMaster(const JobStoreArgs& a, std::chrono::milliseconds timeout, const std::string& who) {
  const size_t colon = a.master.rfind(':');
  if (colon == std::string::npos || colon == 0)
    throw InvalidArgument("--master " + a.master + ": want HOST:PORT of the job's store (MASTER_ADDR:MASTER_PORT)");
  PluginRegistry registry;
  registry.scan(PluginRegistry::searchPath(a.pluginPaths));
  const PluginEntry& plugin = registry.require(a.store, PluginKind::Store);
  std::map<std::string, std::string> given = {{"host", a.master.substr(0, colon)},
                                              {"port", a.master.substr(colon + 1)},
                                              {"timeout", std::to_string(timeout.count()) + "ms"}};
  if (!a.token.empty()) given["auth_token"] = a.token;
  const OptionValues options = clientStoreOptions(*plugin.descriptor,
                                                  resolveOptions(plugin.descriptor->options, given, who), timeout);
  StoreContext ctx;
  ctx.rank = -1;
  ctx.timeout = timeout;
  ctx.logger = std::make_shared<Logger>("commhost." + a.store, who);
  try {
    return plugin.descriptor->createStore(options, ctx);
  } catch (const StoreError& e) {
    if (a.store != "tcp") throw;
    // Whatever went wrong: say the likeliest other cause too.
    throw StoreError(std::string(e.what()) +
                     ". If this is a torch job (torchrun, or init_method env://), its store is torch's TCPStore: add "
                     "--store torch_tcp");
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
