// SPDX-License-Identifier: Apache-2.0
// `commhost run --metrics HOST:PORT` and `--dashboard HOST:PORT`: the launcher serves the
// job's metrics (Prometheus), status records and dashboard over HTTP, read from the job's store, where every rank publishes
// them (commhost/job_status.h). One endpoint per job, whatever the number of ranks.
#pragma once

#include <memory>
#include <string>

#include "commhost/config.h"
#include "commhost/registry.h"
#include "metrics_server.h"

namespace commhost::cli {

// `address`: HOST:PORT (port 0: a free one). A host other than loopback needs `insecure`
// (the endpoint has no authentication; it never shows the store's token or secret options).
// `config` and `registry` must outlive the server.
// `flag` ("--metrics", "--dashboard") names the option in messages. Every endpoint serves
// every path: /metrics, /status.json, the dashboard (/) and its /dashboard.json.
// Which store the endpoint reads the ranks' records from (`commhost run --store`).
enum class StatusStore {
  Config,    // the one the ranks' config names (commhost's tcp store, etcd, ...)
  TorchTcp,  // torch's TCPStore at masterAddr:masterPort: a torch job on init_method env://
};
std::unique_ptr<MetricsServer> serveJobMetrics(const std::string& flag, const std::string& address, bool insecure,
                                               const Config& config, const PluginRegistry& registry,
                                               const std::string& masterAddr, int masterPort, int worldSize,
                                               StatusStore from = StatusStore::Config);

}  // namespace commhost::cli
