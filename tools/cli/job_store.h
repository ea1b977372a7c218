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

#include <CLI/CLI.hpp>

#include "commhost/config.h"
#include "commhost/registry.h"
#include "commhost/sdk/plugin.h"
#include "commhost/store.h"

namespace commhost::cli {

// A store plugin's options as a client's: never the server (serve: never, where the plugin
// has that option), and a store timeout no longer than `timeout` (a store's own timeout,
// as tcp's, rules its connect and its calls).
OptionValues clientStoreOptions(const PluginDescriptor& d, OptionValues options, std::chrono::milliseconds timeout);

// Where a command finds a running job's store: its options, the same for every command
// that talks to a job (addJobStoreOptions).
struct JobStoreArgs {
  std::string master;  // HOST:PORT; empty: MASTER_ADDR:MASTER_PORT
  std::string token;   // the tcp store's auth token
  // The store plugin that speaks to it: "tcp" (commhost's own, `commhost run`'s) or
  // "torch_tcp" (torch's TCPStore: a torchrun or env:// job on the torch bridge).
  std::string store = "tcp";
  std::vector<std::string> pluginPaths;
};
// Adds --master, --token, --store and --plugin-path to `cmd`; `masterRequired` for a
// command with no MASTER_ADDR fallback.
void addJobStoreOptions(CLI::App* cmd, JobStoreArgs& a, bool masterRequired = false);

// A client of the job's store at a.master (the address `commhost run` prints, or
// MASTER_ADDR:MASTER_PORT), through the plugin a.store names. `who` names the command in
// the store's log lines and errors.
std::shared_ptr<Store> connectMaster(const JobStoreArgs& a, std::chrono::milliseconds timeout, const std::string& who);

// The store a config names (any store plugin), as a client with `timeout` at most.
std::shared_ptr<Store> connectConfigStore(const Config& config, const PluginRegistry& registry,
                                          const std::string& masterAddr, int masterPort, int worldSize,
                                          std::chrono::milliseconds timeout, const std::string& who);

}  // namespace commhost::cli
