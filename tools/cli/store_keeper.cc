// SPDX-License-Identifier: Apache-2.0
#include "store_keeper.h"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <vector>

#include "commhost/sdk/host_address.h"

namespace commhost::cli {

StoreKeeper::StoreKeeper(const Config& cfg, LaunchPlan& plan, const std::string& self) {
  if (cfg.host.getString("supervisor.on_peer_loss") != "shrink") return;
  plan.keepGoing = true;
  if (cfg.store.plugin != "tcp" || cfg.store.options.getString("serve") != "auto") {
    std::cerr << "commhost run: supervisor.on_peer_loss is shrink: a failed rank does not stop the job; the store ("
              << cfg.store.plugin << ") must outlive any rank for the others to go on" << std::endl;
    return;
  }
  plan.overrides.push_back("store.options.serve=never");
  if (plan.nodeRank != 0) return;
  const OptionValues& o = cfg.store.options;
  const int64_t port = o.getInt("port") != 0 ? o.getInt("port") : plan.masterPort;
  // As the ranks' tcp store would bind it: where the ranks were told the store is.
  std::string bind = o.getString("bind");
  if (bind.empty()) {
    const std::string host = o.getString("host").empty() ? plan.masterAddr : o.getString("host");
    const LocalAddress mine = listenAddressFor(host);
    if (mine.address.empty())
      throw std::runtime_error("commhost run: the job's store is to be at '" + host + "', which " + mine.whyNone() +
                               ": run node 0 there, or set store.options.bind");
    bind = mine.address;
  }
  std::vector<std::string> args = {self, "store", "serve", "--port", std::to_string(port), "--bind", bind};
  if (!o.getString("auth_token").empty()) {
    args.push_back("--token");
    args.push_back(o.getString("auth_token"));
  } else if (o.getString("bind").empty() && !isLoopbackAddress(bind)) {
    args.push_back("--insecure");  // as the ranks' own store would: it serves, with a warning
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  // Everything is built before fork: the child makes only async-signal-safe calls.
  pid_ = ::fork();
  if (pid_ < 0)
    throw std::runtime_error(std::string("commhost run: cannot start the store server: ") + strerror(errno));
  if (pid_ == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // a launcher killed outright takes its store along
    if (::getppid() != parent) ::_exit(1);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  std::cerr << "commhost run: supervisor.on_peer_loss is shrink: this launcher serves the job's store (pid " << pid_
            << ") so that it outlives any rank; a failed rank does not stop the job" << std::endl;
}

StoreKeeper::~StoreKeeper() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  int status = 0;
  ::waitpid(pid_, &status, 0);  // ECHILD when the launcher's loop reaped it already: nothing to do
}

}  // namespace commhost::cli
