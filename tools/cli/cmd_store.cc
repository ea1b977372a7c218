// SPDX-License-Identifier: Apache-2.0
// commhost store serve --port P [--token T] [--bind ADDR] [--insecure]: the tcp store
// server on its own, for multi-node jobs whose ranks use `serve: never`. It listens on
// loopback unless told otherwise, and refuses another address without a token (anyone
// who reaches it could read and rewrite the job's keys) unless --insecure says so.
// The token is never printed.
#include <arpa/inet.h>

#include <csignal>
#include <cstring>
#include <iostream>

#include "commands.h"
#include "commhost/config.h"
#include "commhost/registry.h"

namespace commhost::cli {
namespace {

struct ServeArgs {
  int port = 29500;
  std::string token;
  std::string bind = "127.0.0.1";
  bool insecure = false;
  int maxConnections = 0;  // 0: the tcp store's default (at least 4096)
  std::vector<std::string> pluginPaths;
};

bool isLoopback(const std::string& address) {
  in_addr v4{};
  if (::inet_pton(AF_INET, address.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  return ::inet_pton(AF_INET6, address.c_str(), &v6) == 1 && std::memcmp(&v6, &in6addr_loopback, sizeof v6) == 0;
}

int serve(const ServeArgs& args) {
  const bool loopback = isLoopback(args.bind);
  if (!loopback && args.token.empty() && !args.insecure) {
    std::cerr << "commhost store serve: refusing to listen on " << args.bind
              << " without a token: anyone who can reach it could read and rewrite the job's keys. Give --token "
                 "(ranks set auth_token or COMMHOST_STORE_TOKEN), bind to 127.0.0.1, or pass --insecure on a "
                 "trusted network\n";
    return 2;
  }
  PluginRegistry registry;
  registry.scan(PluginRegistry::searchPath(args.pluginPaths));
  const PluginEntry& tcp = registry.require("tcp", PluginKind::Store);
  std::map<std::string, std::string> values = {{"serve", "always"},
                                               {"port", std::to_string(args.port)},
                                               {"bind", args.bind},
                                               {"auth_token", args.token},
                                               {"linger", "0"},  // an operator stopping the server means now
                                               {"max_connections", std::to_string(args.maxConnections)}};
  const OptionValues options = resolveOptions(tcp.descriptor->options, values, "commhost store serve");

  // Block the stop signals first so the server thread inherits the mask and sigwait sees them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  StoreContext ctx;
  ctx.logger = std::make_shared<Logger>("commhost.tcp", "store server");
  auto store = tcp.descriptor->createStore(options, ctx);
  // With --port 0 the plugin logs the port it picked.
  if (args.port != 0) std::cout << "commhost store serving on " << args.bind << ":" << args.port << std::endl;
  if (!args.token.empty())
    std::cout << "commhost store: auth token required (clients set auth_token or COMMHOST_STORE_TOKEN)" << std::endl;
  else if (loopback)
    std::cout << "commhost store: no auth token; only this host's processes can reach " << args.bind << std::endl;
  else
    std::cout << "commhost store: WARNING: no auth token (--insecure): any host that reaches " << args.bind
              << " can read and rewrite the job's keys" << std::endl;
  int signal = 0;
  sigwait(&stop, &signal);
  std::cout << "commhost store: stopping on signal " << signal << std::endl;
  return 0;
}

}  // namespace

void addStoreCommand(CLI::App& app) {
  auto* store = app.add_subcommand("store", "Run the tcp store server on its own");
  store->require_subcommand(1);
  store->footer(
      "Examples:\n"
      "  commhost store serve --port 29500 --token SECRET");
  static ServeArgs args;
  auto* serveCmd = store->add_subcommand("serve", "Serve the tcp store until SIGINT/SIGTERM (ranks use serve: never)");
  serveCmd->footer(
      "Examples:\n"
      "  commhost store serve --port 29500 --token SECRET\n"
      "  commhost store serve --port 0                          a free port, printed\n"
      "  commhost store serve --bind 10.0.0.1 --port 29500 --token SECRET\n"
      "                                                         ranks connect with serve: never, MASTER_ADDR/PORT");
  serveCmd->add_option("--port", args.port, "Port to listen on (0 picks a free one and prints it)")
      ->capture_default_str();
  serveCmd->add_option("--token", args.token, "Auth token every client must present");
  serveCmd->add_option("--bind", args.bind, "Address to listen on (a non-loopback one needs --token or --insecure)")
      ->capture_default_str();
  serveCmd->add_flag("--insecure", args.insecure, "Allow a non-loopback --bind without a token");
  serveCmd->add_option("--plugin-path", args.pluginPaths, "Extra directories to search for the tcp plugin");
  serveCmd
      ->add_option("--max-connections", args.maxConnections,
                   "Connections open at once (0: 4096; a job's ranks hold about two each, so give 4 x ranks "
                   "+ 64 for a job of more than ~1,000 ranks)")
      ->check(CLI::Range(0, 1 << 20));
  serveCmd->callback([] {
    const int rc = serve(args);
    if (rc) throw CLI::RuntimeError(rc);
  });
}

}  // namespace commhost::cli
