// SPDX-License-Identifier: Apache-2.0
#include "tcp_store.h"

#include <algorithm>
#include <cstdint>

#include "client.h"
#include "commhost/errors.h"
#include "commhost/sdk/host_address.h"
#include "server.h"

namespace commhost::tcpstore {

OptionSchema<Options> Options::schema() {
  return OptionSchema<Options>()
      .option("host", &Options::host, "", "Server address clients connect to; empty: MASTER_ADDR, else 127.0.0.1")
      .option("port", &Options::port, "0",
              "Server port; 0: MASTER_PORT, else (server side only) a free port picked and logged", {0, 65535})
      .choice("serve", &Options::serve, "auto",
              "auto: global rank 0 hosts the server in its own process; always: this process serves; never: connect "
              "only",
              {{"auto", Serve::Auto}, {"always", Serve::Always}, {"never", Serve::Never}})
      .option("bind", &Options::bind, "",
              "Address the server listens on; empty: the store host's address (host, else MASTER_ADDR, else "
              "Slurm's first node) when that is not loopback, so other hosts reach it, else 127.0.0.1")
      .option("timeout", &Options::timeout, "5m", "Connect and wait timeout of store calls", {0.001, 86400})
      .option("auth_token", &Options::authToken, "",
              "Shared secret every client must present (also COMMHOST_STORE_TOKEN)")
      .size("max_frame", &Options::maxFrame, "256MiB", "Largest frame accepted, in either direction", {1024, 1ll << 31})
      .option("linger", &Options::linger, "2s",
              "How long a serving process, once done with the store, keeps serving ranks still connected", {0, 3600})
      .option("max_connections", &Options::maxConnections, "0",
              "Server: connections open at once; more are closed on accept with a log line. 0: from the job's size, "
              "4 per rank plus 64, at least 4096",
              {0, 1 << 20})
      .option("auth_timeout", &Options::authTimeout, "10s",
              "Server with auth_token: a connection that has not authenticated by then is closed", {0.001, 3600})
      .option("frame_timeout", &Options::frameTimeout, "60s",
              "Server: a frame whose bytes stop arriving is dropped (with its connection) after this", {0.001, 86400})
      .option("progress_interval", &Options::progressInterval, "5s",
              "Client: while the server cannot be reached, a line saying so every this often; 0: none", {0, 3600});
}

int connectionCap(int option, int worldSize) {
  if (option > 0) return option;
  const int64_t sized = 4 * static_cast<int64_t>(std::max(worldSize, 1)) + 64;
  return static_cast<int>(std::clamp<int64_t>(sized, 4096, 1 << 20));
}

// The address the serving rank listens on when `bind` is not set: where the clients were
// told the store is. A job on one host keeps it on loopback.
std::string bindAddress(const Options& options, const StoreContext& ctx) {
  if (!options.bind.empty()) return options.bind;
  const std::string host = options.host.empty() ? ctx.masterAddr : options.host;
  const LocalAddress mine = listenAddressFor(host);
  if (mine.address.empty())
    throw ConfigError("[rank " + std::to_string(ctx.rank) + "] tcp store: this rank serves the store (serve: " +
                      (options.serve == Serve::Always ? "always" : "auto, as rank 0") + "), at '" + host + "' (" +
                      (options.host.empty() ? "MASTER_ADDR, or Slurm's first node" : "store.options.host") +
                      "), which " + mine.whyNone() +
                      ". Start rank 0 on that host, or set store.options.bind to an address of this host");
  if (options.authToken.empty() && ctx.logger && !isLoopbackAddress(mine.address))
    ctx.logger->warn("tcp store on " + mine.address + " (the store host '" + host +
                     "') without an auth token: any process that reaches it can read and rewrite the job's keys; "
                     "set store.options.auth_token (or COMMHOST_STORE_TOKEN) on every rank");
  return mine.address;
}

std::shared_ptr<Store> create(const Options& options, const StoreContext& ctx) {
  const bool serving = options.serve == Serve::Always || (options.serve == Serve::Auto && ctx.rank == 0);
  int port = options.port;
  if (port == 0) port = ctx.masterPort;

  std::shared_ptr<Server> server;
  if (serving) {
    ServerOptions so;
    so.bind = bindAddress(options, ctx);
    so.port = port;
    so.token = options.authToken;
    so.maxFrame = options.maxFrame;
    so.linger = options.linger;
    so.maxConnections = connectionCap(options.maxConnections, ctx.worldSize);
    so.authTimeout = options.authTimeout;
    so.frameTimeout = options.frameTimeout;
    so.logger = ctx.logger;
    server = std::make_shared<Server>(std::move(so));
    if (port == 0 && ctx.logger)
      ctx.logger->info("tcp store serving on " + server->address() + ":" + std::to_string(server->port()) +
                       (options.authToken.empty() ? " (no auth token)" : " (auth token required)"));
    port = server->port();
  } else if (port == 0) {
    throw ConfigError("[rank " + std::to_string(ctx.rank) +
                      "] tcp store: no port to connect to; set MASTER_PORT (commhost run does) or store.options.port");
  }
  ClientOptions co;
  co.host = options.host;
  if (co.host.empty()) co.host = serving ? server->address() : ctx.masterAddr;
  if (co.host.empty() || co.host == "0.0.0.0") co.host = "127.0.0.1";
  co.port = port;
  co.token = options.authToken;
  co.timeout = options.timeout;
  co.maxFrame = options.maxFrame;
  co.rank = ctx.rank;
  co.progressEvery = options.progressInterval;
  co.logger = ctx.logger;
  co.reportLaunch = ctx.reportLaunch;  // ABI 2.1; the loader refuses this plugin to an older host
  return std::make_shared<Client>(std::move(co), server);
}

}  // namespace commhost::tcpstore
