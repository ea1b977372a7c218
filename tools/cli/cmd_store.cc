// commhost store serve --port P [--token T] [--bind ADDR]: the tcp store server on its
// own, for multi-node jobs whose ranks use `serve: never`.
#include <csignal>
#include <iostream>

#include "commands.h"
#include "commhost/config.h"
#include "commhost/registry.h"

namespace commhost::cli {
namespace {

struct ServeArgs {
  int port = 29500;
  std::string token;
  std::string bind = "0.0.0.0";
  std::vector<std::string> pluginPaths;
};

int serve(const ServeArgs& args) {
  PluginRegistry registry;
  registry.scan(PluginRegistry::searchPath(args.pluginPaths));
  const PluginEntry& tcp = registry.require("tcp", PluginKind::Store);
  std::map<std::string, std::string> values = {
      {"serve", "always"}, {"port", std::to_string(args.port)}, {"bind", args.bind}, {"auth_token", args.token},
      {"linger", "0"}};  // an operator stopping the server means now
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
  int signal = 0;
  sigwait(&stop, &signal);
  std::cout << "commhost store: stopping on signal " << signal << std::endl;
  return 0;
}

}  // namespace

void addStoreCommand(CLI::App& app) {
  auto* store = app.add_subcommand("store", "Run the tcp store server on its own");
  store->require_subcommand(1);
  static ServeArgs args;
  auto* serveCmd = store->add_subcommand("serve", "Serve the tcp store until SIGINT/SIGTERM (ranks use serve: never)");
  serveCmd->add_option("--port", args.port, "Port to listen on (0 picks a free one and prints it)")->capture_default_str();
  serveCmd->add_option("--token", args.token, "Auth token every client must present");
  serveCmd->add_option("--bind", args.bind, "Address to listen on")->capture_default_str();
  serveCmd->add_option("--plugin-path", args.pluginPaths, "Extra directories to search for the tcp plugin");
  serveCmd->callback([] {
    const int rc = serve(args);
    if (rc) throw CLI::RuntimeError(rc);
  });
}

}  // namespace commhost::cli
