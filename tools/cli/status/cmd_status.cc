// SPDX-License-Identifier: Apache-2.0
// commhost status --master HOST:PORT [--json] [--watch]: a running job as its ranks
// published it in the job's store (commhost/job_status.h). Reads the store only: a query
// costs the ranks nothing.
#include <chrono>
#include <csignal>
#include <iostream>
#include <thread>

#include "../commands.h"
#include "../job_store.h"
#include "commhost/errors.h"
#include "commhost/job_status.h"
#include "status_view.h"

namespace commhost::cli {
namespace {

struct StatusArgs {
  std::string master;
  std::string token;
  std::vector<std::string> pluginPaths;
  bool json = false;
  bool watch = false;
  double interval = 1.0;
  double behindAfter = 2.0;
};

// Exit status when the summary names a problem (a rank behind, silent or lost).
constexpr int kProblemsFound = 3;

int64_t nowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Reading {
  std::vector<ProcessStatus> ranks;
  std::vector<std::string> problems;
  int world = 0;
};

Reading readOnce(Store& store) {
  Reading r;
  r.ranks = readJobStatus(store, &r.problems);
  if (store.check({"commhost/status/world"}))
    r.world = static_cast<int>(counterValue("commhost/status/world", store.get("commhost/status/world")));
  return r;
}

ViewOptions viewOptions(const StatusArgs& a, const Reading& r) {
  ViewOptions o;
  o.nowUnixMs = nowUnixMs();
  o.behindAfterSeconds = a.behindAfter;
  o.expectedRanks = r.world;
  return o;
}

bool healthy(const std::string& summary) {
  return summary.find(" ok") != std::string::npos && summary.find(';') == std::string::npos;
}

int showOnce(const StatusArgs& a, Store& store) {
  const Reading r = readOnce(store);
  if (a.json) {
    std::cout << jobStatusJson(r.ranks) << "\n";
    for (const auto& p : r.problems) std::cerr << "commhost status: " << p << "\n";
    return 0;
  }
  const ViewOptions o = viewOptions(a, r);
  const std::string summary = summaryLine(r.ranks, o);
  std::cout << summary << "\n" << details(r.ranks, o);
  std::map<std::string, uint64_t> none;
  const auto events = newEvents(r.ranks, none);
  if (!events.empty()) std::cout << "recent events:\n";
  for (size_t i = events.size() > 10 ? events.size() - 10 : 0; i < events.size(); ++i)
    std::cout << "  " << events[i] << "\n";
  for (const auto& p : r.problems) std::cout << "note: " << p << "\n";
  return r.ranks.empty() || !healthy(summary) ? kProblemsFound : 0;
}

// Monitor mode: the summary when it changes, and each event once, as they happen.
int watch(const StatusArgs& a, Store& store) {
  std::map<std::string, uint64_t> seen;
  std::string lastSummary;
  bool first = true;
  for (;;) {
    Reading r;
    try {
      r = readOnce(store);
    } catch (const Error& e) {
      std::cout << "the job's store at " << a.master << " stopped answering (" << e.what()
                << "): the job has ended, or its store died" << std::endl;
      return 0;
    }
    const auto events = newEvents(r.ranks, seen);
    if (!first)
      for (const auto& line : events) std::cout << line << "\n";
    const std::string summary = summaryLine(r.ranks, viewOptions(a, r));
    if (summary != lastSummary) std::cout << (first ? "" : "status: ") << summary << "\n";
    std::cout.flush();
    lastSummary = summary;
    first = false;
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(a.interval * 1000)));
  }
}

}  // namespace

void addStatusCommand(CLI::App& app) {
  static StatusArgs a;
  auto* cmd = app.add_subcommand("status", "Show a running job: its ranks, ops in flight, who is behind, events");
  cmd->add_option("--master", a.master, "HOST:PORT of the job's tcp store (default: MASTER_ADDR:MASTER_PORT)");
  cmd->add_option("--token", a.token, "The store's auth token, if it has one");
  cmd->add_option("--plugin-path", a.pluginPaths, "Extra directories to search for the tcp plugin");
  cmd->add_flag("--json", a.json, "Print the ranks' records as JSON (commhost/job_status.h's schema)");
  cmd->add_flag("--watch", a.watch, "Monitor mode: print events (peer lost, swaps, incidents) as they happen");
  cmd->add_option("--interval", a.interval, "Seconds between reads with --watch")->check(CLI::Range(0.05, 3600.0));
  cmd->add_option("--behind-after", a.behindAfter,
                  "Seconds ranks may wait in an op for a rank that has not issued it before it is called behind")
      ->check(CLI::Range(0.0, 86400.0));
  cmd->footer(
      "Examples:\n"
      "  commhost status --master 127.0.0.1:29500     the address `commhost run` printed as \"store at\"\n"
      "  commhost status --master 127.0.0.1:29500 --watch\n"
      "Exit status: 0 when every rank is ok, 3 when the summary names a problem, 1 on an error.\n"
      "Ranks publish once per supervisor.heartbeat.interval; a query reads the store only.");
  cmd->callback([] {
    if (a.master.empty()) {
      const char* addr = std::getenv("MASTER_ADDR");
      const char* port = std::getenv("MASTER_PORT");
      if (!addr || !port)
        throw CLI::ValidationError("--master", "give HOST:PORT of the job's store (MASTER_ADDR/MASTER_PORT are unset)");
      a.master = std::string(addr) + ":" + port;
    }
    const auto store = connectMaster(a.master, a.token, a.pluginPaths, std::chrono::seconds(5), "commhost status");
    const int rc = a.watch ? watch(a, *store) : showOnce(a, *store);
    if (rc) throw CLI::RuntimeError(rc);
  });
}

}  // namespace commhost::cli
