// SPDX-License-Identifier: Apache-2.0
#include "job_metrics.h"

#include <chrono>
#include <iostream>
#include <mutex>

#include "../job_store.h"
#include "commhost/errors.h"
#include "commhost/job_status.h"
#include "dashboard.h"
#include "prometheus.h"

namespace commhost::cli {
namespace {

// A scrape waits at most this long for the store (the ranks publish once per heartbeat
// interval, so a slow store is the only thing a scrape can wait for).
constexpr std::chrono::milliseconds kStoreTimeout{2000};

int64_t nowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The server's thread only: a store client made at the first request (the store may not
// serve yet when the launcher starts) and made again after it failed.
struct StoreReader {
  const Config& config;
  const PluginRegistry& registry;
  std::string masterAddr;
  int masterPort;
  int worldSize;
  StatusStore from;
  std::shared_ptr<Store> store;

  std::vector<ProcessStatus> read() {
    if (!store) store = connect();
    try {
      std::vector<std::string> problems;
      return readJobStatus(*store, &problems);
    } catch (const std::exception&) {
      store.reset();
      throw;
    }
  }

  std::shared_ptr<Store> connect() const {
    const std::string who = "commhost run --metrics";
    if (from == StatusStore::Config)
      return connectConfigStore(config, registry, masterAddr, masterPort, worldSize, kStoreTimeout, who);
    JobStoreArgs torch;
    torch.master = masterAddr + ":" + std::to_string(masterPort);
    torch.store = "torch_tcp";
    return connectMaster(torch, kStoreTimeout, who);
  }
};

bool isLoopback(const std::string& host) { return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1"; }

}  // namespace

std::unique_ptr<MetricsServer> serveJobMetrics(const std::string& flag, const std::string& address, bool insecure,
                                               const Config& config, const PluginRegistry& registry,
                                               const std::string& masterAddr, int masterPort, int worldSize,
                                               StatusStore from) {
  const size_t colon = address.rfind(':');
  const std::string host = colon == std::string::npos ? "" : address.substr(0, colon);
  const std::string port = colon == std::string::npos ? "" : address.substr(colon + 1);
  if (host.empty() || port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(port) > 65535)
    throw InvalidArgument(flag + " " + address + ": want HOST:PORT, e.g. 127.0.0.1:9400 (port 0: any free one)");
  // The job's store token guards the endpoint too: whoever may read the store may read this.
  const OptionValues& storeOptions = config.store.options;
  const std::string token = storeOptions.has("auth_token") ? storeOptions.getString("auth_token") : "";
  if (!isLoopback(host) && token.empty() && !insecure)
    throw InvalidArgument(flag + " " + address +
                          ": the job's store has no auth token, so the endpoint binds loopback unless told "
                          "otherwise: give 127.0.0.1:" +
                          port +
                          ", give the store a token (store.options.auth_token or COMMHOST_STORE_TOKEN), "
                          "which the endpoint then requires, or add " +
                          flag + "-insecure to serve " + host + " to its network");
  if (!isLoopback(host) && token.empty())
    std::cerr << "commhost run: warning: " << flag << " serves " << address << " without authentication (" << flag
              << "-insecure): anyone who reaches it sees the job's status" << std::endl;
  auto reader = std::make_shared<StoreReader>(
      StoreReader{config, registry, masterAddr, masterPort, worldSize, from, {}});
  const std::string page = dashboardPage();  // read once: a missing page is said at start
  return std::make_unique<MetricsServer>(
      host == "localhost" ? "127.0.0.1" : host, std::stoi(port),
      [reader, page, worldSize](const std::string& path, std::string& contentType) -> std::string {
        if (path == "/" || path == "/index.html") {
          contentType = "text/html; charset=utf-8";
          return page;
        }
        if (path == "/dashboard.json") {
          contentType = "application/json";
          return dashboardJson(reader->read(), nowUnixMs(), worldSize);
        }
        if (path == "/metrics") {
          contentType = "text/plain; version=0.0.4; charset=utf-8";
          return prometheusText(reader->read(), nowUnixMs());
        }
        if (path == "/status.json") {
          contentType = "application/json";
          return jobStatusJson(reader->read()) + "\n";
        }
        return "";
      },
      token);
}

}  // namespace commhost::cli
