#include "tcp_store.h"

#include "client.h"
#include "commhost/errors.h"
#include "server.h"

namespace commhost::tcpstore {

const std::vector<OptionSpec>& optionSpecs() {
  static const std::vector<OptionSpec> kOptions = {
    {"host", OptionType::String, "", "Server address clients connect to; empty: MASTER_ADDR, else 127.0.0.1"},
    {"port", OptionType::Int, "0",
     "Server port; 0: MASTER_PORT, else (server side only) a free port picked and logged", {}, 0, 65535},
    {"serve", OptionType::Enum, "auto",
     "auto: global rank 0 hosts the server in its own process; always: this process serves; never: connect only",
     {"auto", "always", "never"}},
    {"bind", OptionType::String, "127.0.0.1", "Address the server listens on (loopback unless configured)"},
    {"timeout", OptionType::Duration, "5m", "Connect and wait timeout of store calls", {}, 0.001, 86400},
    {"auth_token", OptionType::String, "", "Shared secret every client must present (also COMMHOST_STORE_TOKEN)"},
    {"max_frame", OptionType::Size, "256MiB", "Largest frame accepted, in either direction", {}, 1024, 1ll << 31},
    {"linger", OptionType::Duration, "2s",
     "How long a serving process, once done with the store, keeps serving ranks still connected", {}, 0, 3600},
    {"max_connections", OptionType::Int, "4096",
     "Server: connections open at once; more are closed on accept with a log line", {}, 1, 1 << 20},
    {"auth_timeout", OptionType::Duration, "10s",
     "Server with auth_token: a connection that has not authenticated by then is closed", {}, 0.001, 3600},
    {"frame_timeout", OptionType::Duration, "60s",
     "Server: a frame whose bytes stop arriving is dropped (with its connection) after this", {}, 0.001, 86400},
    {"progress_interval", OptionType::Duration, "5s",
     "Client: while the server cannot be reached, a line saying so every this often; 0: none", {}, 0, 3600},
  };
  return kOptions;
}

std::shared_ptr<Store> create(const OptionValues& options, const StoreContext& ctx) {
  const std::string serve = options.getString("serve");
  const bool serving = serve == "always" || (serve == "auto" && ctx.rank == 0);
  int port = static_cast<int>(options.getInt("port"));
  if (port == 0) port = ctx.masterPort;
  const uint32_t maxFrame = static_cast<uint32_t>(options.getInt("max_frame"));

  std::shared_ptr<Server> server;
  if (serving) {
    ServerOptions so;
    so.bind = options.getString("bind");
    so.port = port;
    so.token = options.getString("auth_token");
    so.maxFrame = maxFrame;
    so.linger = options.getDuration("linger");
    so.maxConnections = static_cast<int>(options.getInt("max_connections"));
    so.authTimeout = options.getDuration("auth_timeout");
    so.frameTimeout = options.getDuration("frame_timeout");
    so.logger = ctx.logger;
    server = std::make_shared<Server>(std::move(so));
    if (port == 0 && ctx.logger)
      ctx.logger->info("tcp store serving on " + server->address() + ":" + std::to_string(server->port()) +
                       (options.getString("auth_token").empty() ? " (no auth token)" : " (auth token required)"));
    port = server->port();
  } else if (port == 0) {
    throw ConfigError("[rank " + std::to_string(ctx.rank) +
                      "] tcp store: no port to connect to; set MASTER_PORT (commhost run does) or store.options.port");
  }
  ClientOptions co;
  co.host = options.getString("host");
  if (co.host.empty()) co.host = serving ? server->address() : ctx.masterAddr;
  if (co.host.empty() || co.host == "0.0.0.0") co.host = "127.0.0.1";
  co.port = port;
  co.token = options.getString("auth_token");
  co.timeout = options.getDuration("timeout");
  co.maxFrame = maxFrame;
  co.rank = ctx.rank;
  co.progressEvery = options.getDuration("progress_interval");
  co.logger = ctx.logger;
  return std::make_shared<Client>(std::move(co), server);
}

}  // namespace commhost::tcpstore
