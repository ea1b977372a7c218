// SPDX-License-Identifier: Apache-2.0
// commhost run -n N [-c CONFIG | --watch CONFIG] [--set k=v]... [--nnodes M --node-rank I --master HOST:PORT] --
//   PROGRAM ARGS
#include <unistd.h>

#include <climits>
#include <iostream>
#include <memory>
#include <utility>
#include <vector>

#include "commands.h"
#include "commhost/config.h"
#include "commhost/errors.h"
#include "commhost/process_group.h"
#include "commhost/registry.h"
#include "config_watch.h"
#include "launcher.h"
#include "status/job_metrics.h"
#include "store_keeper.h"

namespace commhost::cli {
namespace {

std::string selfPath() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "commhost";
}

struct RunArgs {
  int ranks = 1;
  int nodes = 1;
  int nodeRank = 0;
  std::string master;
  std::string config;
  std::string watch;
  std::vector<std::string> sets;
  double grace = 5;
  double settle = 1;
  int maxRestarts = 0;
  std::string metrics, dashboard;
  bool metricsInsecure = false, dashboardInsecure = false;
  std::string statusStore;  // --store: "" (the config's) or "torch_tcp"
  std::vector<std::string> command;
};

// The line that tells the operator where the job's store is, from the config the ranks
// will load: the tcp store's host and port options, else MASTER_ADDR and MASTER_PORT as
// the launcher sets them. `commhost trace dump --master` needs that address.
std::string storeLine(const Config& cfg, const LaunchPlan& plan) {
  const std::string anyJob = "kill -USR1 " + std::to_string(::getpid()) + " dumps every rank of any job)";
  if (cfg.store.plugin != "tcp")
    return "commhost run: store: the " + cfg.store.plugin + " plugin (`commhost trace dump` needs the tcp store; " +
           anyJob;
  const OptionValues& o = cfg.store.options;
  const std::string host = o.getString("host").empty() ? plan.masterAddr : o.getString("host");
  const int64_t port = o.getInt("port") != 0 ? o.getInt("port") : plan.masterPort;
  const std::string address = host + ":" + std::to_string(port);
  const bool token = o.has("auth_token") && !o.getString("auth_token").empty();
  return "commhost run: store at " + address + " (commhost trace dump --master " + address +
         (token ? " --token TOKEN" : "") + "; a torch job's store is torch's TCPStore there: add --store torch_tcp; " +
         anyJob;
}

// --master HOST:PORT into the plan; required for a multi-node job.
void parseMaster(const RunArgs& args, LaunchPlan& plan) {
  if (!args.master.empty()) {
    const size_t colon = args.master.rfind(':');
    if (colon == std::string::npos) throw CLI::ValidationError("--master", "expected HOST:PORT");
    plan.masterAddr = args.master.substr(0, colon);
    const std::string port = args.master.substr(colon + 1);
    if (port.empty() || port.find_first_not_of("0123456789") != std::string::npos || port.size() > 5 ||
        std::stoi(port) > 65535 || (std::stoi(port) == 0 && args.nodes > 1))
      throw CLI::ValidationError("--master", "'" + args.master +
                                                 "': the port must be 1..65535 (0, a free port, "
                                                 "only for single-node jobs)");
    plan.masterPort = std::stoi(port);
  } else if (args.nodes > 1) {
    throw CLI::ValidationError("--master", "a multi-node job needs --master HOST:PORT (node 0's address)");
  }
}

// --metrics and --dashboard: their endpoints (one when both give the same address),
// serving until the launcher returns.
std::vector<std::unique_ptr<MetricsServer>> startEndpoints(const RunArgs& args, const Config* config,
                                                           const PluginRegistry& registry, const LaunchPlan& plan) {
  std::vector<std::unique_ptr<MetricsServer>> out;
  for (const auto& [flag, address] :
       {std::pair<std::string, std::string>{"--metrics", args.metrics}, {"--dashboard", args.dashboard}}) {
    if (address.empty() || (flag == "--dashboard" && address == args.metrics)) continue;
    if (!config)
      throw CLI::ValidationError(flag,
                                 "the ranks' config does not load here, so the launcher cannot read their "
                                 "store: give -c CONFIG");
    out.push_back(serveJobMetrics(flag, address, flag == "--metrics" ? args.metricsInsecure : args.dashboardInsecure,
                                  *config, registry, plan.masterAddr, plan.masterPort, plan.localRanks * plan.nodes,
                                  args.statusStore == "torch_tcp" ? StatusStore::TorchTcp : StatusStore::Config));
    const std::string url = "http://" + address.substr(0, address.rfind(':')) + ":" +
                            std::to_string(out.back()->port());
    // The token itself is never printed: the operator has it (the config or COMMHOST_STORE_TOKEN).
    const OptionValues& o = config->store.options;
    const bool token = o.has("auth_token") && !o.getString("auth_token").empty();
    if (flag == "--metrics" || address == args.metrics)
      std::cerr << "commhost run: metrics at " << url << "/metrics (Prometheus), the ranks' status at /status.json"
                << (token ? "; send the store's token: Authorization: Bearer TOKEN" : "") << std::endl;
    if (flag == "--dashboard" || args.dashboard == args.metrics)
      std::cerr << "commhost run: dashboard at " << url << "/" << (token ? "?token=TOKEN (the store's token)" : "")
                << std::endl;
  }
  return out;
}

int run(const RunArgs& args, std::vector<std::string> command) {
  if (command.empty()) throw CLI::ValidationError("run", "give the program to start after --, e.g. -- commhost bench");
  if (!args.statusStore.empty() && args.metrics.empty() && args.dashboard.empty())
    throw CLI::ValidationError("--store", "only --metrics and --dashboard read the job's store: give one of them");
  if (args.nodeRank < 0 || args.nodeRank >= args.nodes)
    throw CLI::ValidationError("--node-rank", "must be in [0, --nnodes)");
  LaunchPlan plan;
  plan.localRanks = args.ranks;
  plan.nodes = args.nodes;
  plan.nodeRank = args.nodeRank;
  plan.overrides = args.sets;
  plan.grace = std::chrono::milliseconds(static_cast<int64_t>(args.grace * 1000));
  plan.settle = std::chrono::milliseconds(static_cast<int64_t>(args.settle * 1000));
  parseMaster(args, plan);
  if (plan.masterPort == 0) plan.masterPort = pickFreePort();
  std::string configFile = args.config;
  if (!args.watch.empty()) {
    if (!args.config.empty() && args.config != args.watch)
      throw CLI::ValidationError("--watch",
                                 "the job runs the file it watches: give it alone, without -c " + args.config);
    configFile = args.watch;
  }
  // The ranks' world groups read the store for published configs and join requests
  // (ProcessGroup::syncPoint).
  bool pollSet = false;
  for (const auto& s : args.sets) pollSet = pollSet || s.rfind("group.sync_poll=", 0) == 0;
  if (!pollSet && (!args.watch.empty() || args.maxRestarts > 0))
    plan.overrides.insert(plan.overrides.begin(), "group.sync_poll=200ms");
  PluginRegistry registry;
  ConfigOverrides overrides;
  overrides.set = plan.overrides;
  std::unique_ptr<Config> config;  // as the ranks will load it, when it loads here
  if (!configFile.empty()) {
    char resolved[PATH_MAX];
    if (!::realpath(resolveConfigPath(configFile).c_str(), resolved))
      throw CLI::ValidationError(args.watch.empty() ? "-c" : "--watch",
                                 "cannot read config file '" + configFile +
                                     "' (nor an installed config of that name in " + installedConfigDir() + ")");
    plan.configPath = resolved;
    // Check the config once here rather than failing N times in the ranks (an unreadable
    // file is refused there, with the loader's hints); then the text the ranks start on.
    config = std::make_unique<Config>(loadConfigFile(plan.configPath, registry, overrides));
    std::cerr << storeLine(*config, plan) << std::endl;
    plan.configText = readConfigSnapshot(plan.configPath);
  } else {
    // The ranks load COMMHOST_CONFIG or the embedded default; if that fails, they say so.
    try {
      config = std::make_unique<Config>(loadConfigOrDefault(detectLaunch().configPath, registry, overrides));
      std::cerr << storeLine(*config, plan) << std::endl;
    } catch (const Error&) {
      std::cerr << "commhost run: store at " << plan.masterAddr << ":" << plan.masterPort
                << " unless the ranks' config says otherwise (it does not load here)" << std::endl;
    }
  }
  std::unique_ptr<StoreKeeper> keeper;
  if (config) keeper = std::make_unique<StoreKeeper>(*config, plan, selfPath());
  if (args.maxRestarts > 0 && !plan.keepGoing)
    throw CLI::ValidationError("--max-restarts",
                               "a restarted rank joins the running job, which needs the others to go on without it: "
                               "set supervisor.on_peer_loss: shrink (--set supervisor.on_peer_loss=shrink)");
  plan.maxRestarts = args.maxRestarts;
  const auto endpoints = startEndpoints(args, config.get(), registry, plan);

  if (command[0] == "commhost") command[0] = selfPath();
  plan.command = command;
  std::unique_ptr<ConfigWatch> watch;
  if (!args.watch.empty() && args.nodeRank > 0) {
    // One publisher per job: node 0's launcher. This node's ranks poll all the same.
    std::cerr << "commhost run: --watch: node 0's launcher publishes the edits of " << plan.configPath
              << "; this node's ranks apply them" << std::endl;
  } else if (!args.watch.empty()) {
    watch = std::make_unique<ConfigWatch>(plan.configPath, plan.configText, plan.overrides, plan.masterAddr,
                                          plan.masterPort, plan.localRanks * plan.nodes);
    plan.watchPath = plan.configPath;
    plan.onConfigChange = [&watch](const std::string& why) { watch->changed(why, why == "SIGHUP"); };
    std::cerr << "commhost run: watching " << plan.configPath
              << ": an edit (or SIGHUP) is published to the ranks, which switch at the same syncPoint()" << std::endl;
  }
  return launch(plan);
}

}  // namespace

void addRunCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "run",
      "Start N local ranks of PROGRAM (torchrun-style environment: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, ...; "
      "OMP_NUM_THREADS=1 when several ranks share the host and it is not set)");
  static RunArgs args;
  cmd->add_option("-n,--nproc", args.ranks, "Ranks to start on this node")->required()->check(CLI::Range(1, 4096));
  cmd->add_option("-c,--config", args.config,
                  "Config file given to every rank (COMMHOST_CONFIG), or the name of an installed one: default, gloo, "
                  "hier, shm");
  cmd->add_option("--watch", args.watch,
                  "Config file given to every rank (as -c) and watched: each valid edit, and each SIGHUP to "
                  "commhost run, is published to the job and applied by every rank at the same syncPoint() "
                  "(commhost bench and train call it every iteration); an invalid edit is printed with its "
                  "errors and the job goes on with its config. Sets group.sync_poll=200ms unless --set gives it")
      ->type_name("FILE");
  cmd->add_option("--set", args.sets, "Override a config key in every rank: --set group.timeout=10s (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--nnodes", args.nodes, "Nodes in the job (run the same command on each)")
      ->check(CLI::Range(1, 65536));
  cmd->add_option("--node-rank", args.nodeRank, "This node's index, 0 .. nnodes-1");
  cmd->add_option("--master", args.master, "HOST:PORT of the store (node 0); default: this host, a free port");
  cmd->add_option("--max-restarts", args.maxRestarts,
                  "With supervisor.on_peer_loss: shrink, start a rank that failed again, up to N times per rank: the "
                  "new process joins the running job at the others' next syncPoint() (sets group.sync_poll=200ms "
                  "unless --set gives it)")
      ->type_name("N")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--metrics", args.metrics,
                  "Serve the job's metrics (Prometheus, /metrics) and status (/status.json) over HTTP at HOST:PORT "
                  "(port 0: any free one); loopback unless --metrics-insecure")
      ->type_name("HOST:PORT");
  cmd->add_flag("--metrics-insecure", args.metricsInsecure,
                "Allow --metrics on an address other than loopback (no authentication: anyone who reaches it sees "
                "the job's status)");
  cmd->add_option("--dashboard", args.dashboard,
                  "Serve a live page of the job (ranks, per-op charts, swaps, incidents) at HOST:PORT (port 0: any "
                  "free one); loopback unless --dashboard-insecure")
      ->type_name("HOST:PORT");
  cmd->add_flag("--dashboard-insecure", args.dashboardInsecure,
                "Allow --dashboard on an address other than loopback (no authentication)");
  cmd->add_option("--store", args.statusStore,
                  "Where --metrics and --dashboard read the ranks' status: the config's store (the default), or "
                  "torch_tcp: torch's TCPStore at MASTER_ADDR:MASTER_PORT, the store of a torch job that calls "
                  "init_process_group(\"commhost\") with init_method env://")
      ->check(CLI::IsMember({"torch_tcp"}))
      ->type_name("torch_tcp");
  cmd->add_option("--grace", args.grace, "Seconds between SIGTERM and SIGKILL when stopping ranks")
      ->capture_default_str();
  cmd->add_option("--settle", args.settle,
                  "Seconds the other ranks get to exit (and report) by themselves after one fails, before SIGTERM")
      ->capture_default_str();
  cmd->add_option("program", args.command, "The program to start in each rank, and its arguments (after --)");
  cmd->footer(
      "Examples:\n"
      "  commhost run -n 4 -c configs/gloo.yaml -- commhost bench --op all --check\n"
      "  commhost run -n 2 --set group.timeout=10s -- ./my_app --steps 10\n"
      "  commhost run -n 4 --watch my.yaml -- commhost train --epochs 50   then edit my.yaml, or kill -HUP\n"
      "  commhost run -n 8 --nnodes 2 --node-rank 0 --master node0:29500 -- ./my_app\n"
      "It prints the store's address first: commhost trace dump --master HOST:PORT asks the running job for dumps.");
  cmd->callback([] {
    std::vector<std::string> command = args.command;
    for (const auto& a : trailingArgs()) command.push_back(a);
    const int rc = run(args, command);
    if (rc) throw CLI::RuntimeError(rc);
  });
}

}  // namespace commhost::cli
