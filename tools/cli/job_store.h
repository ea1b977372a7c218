// SPDX-License-Identifier: Apache-2.0
// A client of a running job's store, for the commands that talk to a job from outside
// (`commhost trace dump`, `commhost status`, `commhost run --metrics`): never its server,
// and bounded by `timeout` so that a store that does not answer costs the caller that
// long at most.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "commhost/config.h"
#include "commhost/registry.h"
#include "commhost/sdk/plugin.h"
#include "commhost/store.h"

namespace commhost::cli {

// A store plugin's options as a client's: never the server (serve: never, where the plugin
// has that option), and a store timeout no longer than `timeout` (a store's own timeout,
// as tcp's, rules its connect and its calls).
OptionValues clientStoreOptions(const PluginDescriptor& d, OptionValues options, std::chrono::milliseconds timeout);

// The tcp store at HOST:PORT (the address `commhost run` prints, or MASTER_ADDR:MASTER_PORT).
// `who` names the command in the store's log lines and errors.
std::shared_ptr<Store> connectMaster(const std::string& master, const std::string& token,
                                     const std::vector<std::string>& pluginPaths, std::chrono::milliseconds timeout,
                                     const std::string& who);

// The store a config names (any store plugin), as a client with `timeout` at most.
std::shared_ptr<Store> connectConfigStore(const Config& config, const PluginRegistry& registry,
                                          const std::string& masterAddr, int masterPort, int worldSize,
                                          std::chrono::milliseconds timeout, const std::string& who);

}  // namespace commhost::cli
