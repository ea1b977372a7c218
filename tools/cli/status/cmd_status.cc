// SPDX-License-Identifier: Apache-2.0
// commhost status --master HOST:PORT [--json] [--watch]: a running job as its ranks
// published it in the job's store (commhost/job_status.h). Reads the store only: a query
// costs the ranks nothing.
#include <chrono>
#include <csignal>
#include <iostream>
#include <optional>
#include <thread>

#include <unistd.h>

#include "../commands.h"
#include "../job_store.h"
#include "commhost/errors.h"
#include "commhost/job_status.h"
#include "commhost/process_group.h"
#include "status_view.h"
#include "top_view.h"

namespace commhost::cli {
namespace {

struct StatusArgs {
  JobStoreArgs job;
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
  r.ranks = readJobStatus(store, &r.problems, &r.world);
  return r;
}

// The monitor modes' reading: none once the store stopped answering (said on stdout: the
// job has ended), which ends the mode with status 0.
std::optional<Reading> readWhileUp(const StatusArgs& a, Store& store) {
  try {
    return readOnce(store);
  } catch (const Error& e) {
    std::cout << "the job's store at " << a.job.master << " stopped answering (" << e.what()
              << "): the job has ended, or its store died" << std::endl;
    return std::nullopt;
  }
}

ViewOptions viewOptions(const StatusArgs& a, const Reading& r) {
  ViewOptions o;
  o.nowUnixMs = nowUnixMs();
  o.behindAfterSeconds = a.behindAfter;
  o.expectedRanks = r.world;
  return o;
}

// The store's address as the ranks find it (MASTER_ADDR:MASTER_PORT, or Slurm's).
std::string masterFromEnvironment() {
  const LaunchInfo launch = detectLaunch();
  if (launch.masterAddr.empty() || launch.masterPort == 0)
    throw CLI::ValidationError("--master", "give HOST:PORT of the job's store (MASTER_ADDR/MASTER_PORT are unset)");
  return launch.masterAddr + ":" + std::to_string(launch.masterPort);
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
  const bool healthy = !r.ranks.empty() && problems(r.ranks, o).empty();
  std::cout << summary << "\n" << details(r.ranks, o);
  std::map<std::string, uint64_t> none;
  const auto events = newEvents(r.ranks, none);
  if (!events.empty()) std::cout << "recent events:\n";
  for (size_t i = events.size() > 10 ? events.size() - 10 : 0; i < events.size(); ++i)
    std::cout << "  " << events[i] << "\n";
  for (const auto& p : r.problems) std::cout << "note: " << p << "\n";
  return healthy ? 0 : kProblemsFound;
}

// Monitor mode: the summary when it changes, and each event once, as they happen.
int watch(const StatusArgs& a, Store& store) {
  std::map<std::string, uint64_t> seen;
  std::string lastSignature;
  bool first = true;
  for (;;) {
    const std::optional<Reading> read = readWhileUp(a, store);
    if (!read) return 0;
    const Reading& r = *read;
    const auto events = newEvents(r.ranks, seen);
    if (!first)
      for (const auto& line : events) std::cout << line << "\n";
    // The summary when what it names changes (which ranks, which problem), not when only
    // its seconds grow.
    const ViewOptions o = viewOptions(a, r);
    std::string signature = std::to_string(r.ranks.size());
    for (const Problem& p : problems(r.ranks, o)) signature += " " + p.kind + ":" + std::to_string(p.rank);
    if (signature != lastSignature) std::cout << (first ? "" : "status: ") << summaryLine(r.ranks, o) << "\n";
    std::cout.flush();
    lastSignature = signature;
    first = false;
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(a.interval * 1000)));
  }
}

// commhost top: a frame per interval, each from two readings `interval` apart.
int top(const StatusArgs& a, Store& store, int iterations) {
  const bool tty = ::isatty(STDOUT_FILENO) != 0;
  Reading before = readOnce(store);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; iterations <= 0 || i < iterations; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(a.interval * 1000)));
    std::optional<Reading> read = readWhileUp(a, store);
    if (!read) return 0;
    Reading now = std::move(*read);
    const auto t1 = std::chrono::steady_clock::now();
    const ViewOptions o = viewOptions(a, now);
    const TopFrame frame = topFrame(before.ranks, now.ranks, std::chrono::duration<double>(t1 - t0).count(),
                                    o.nowUnixMs);
    // On a terminal the frame replaces the last one; in a pipe or file frames follow each other.
    std::cout << (tty ? "\033[H\033[2J" : "") << renderTop(frame, summaryLine(now.ranks, o)) << (tty ? "" : "\n");
    std::cout.flush();
    before = std::move(now);
    t0 = t1;
  }
  return 0;
}

}  // namespace

void addTopCommand(CLI::App& app) {
  static StatusArgs a;
  static int iterations = 0;
  auto* cmd = app.add_subcommand("top", "A running job live: per rank and op, ops/s, bandwidth, p50/p99 latency");
  addJobStoreOptions(cmd, a.job);
  cmd->add_option("--interval", a.interval, "Seconds per frame (the rates are over it)")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  cmd->add_option("-n,--iterations", iterations, "Frames to show, then exit (0: until interrupted)");
  cmd->footer(
      "Examples:\n"
      "  commhost top --master 127.0.0.1:29500\n"
      "  commhost top --master 127.0.0.1:29500 -n 5 > top.log      plain frames, one after another\n"
      "Rates are of the ops completed within each frame, from the ranks' records (published once per\n"
      "supervisor.heartbeat.interval: keep --interval above it). busbw uses nccl-tests' factors on each rank's\n"
      "own buffer bytes. p50/p99 are read within the latency buckets (1-2-5 steps).");
  cmd->callback([] {
    if (a.job.master.empty()) a.job.master = masterFromEnvironment();
    const auto store = connectMaster(a.job, std::chrono::seconds(5), "commhost top");
    const int rc = top(a, *store, iterations);
    if (rc) throw CLI::RuntimeError(rc);
  });
}

void addStatusCommand(CLI::App& app) {
  static StatusArgs a;
  auto* cmd = app.add_subcommand("status", "Show a running job: its ranks, ops in flight, who is behind, events");
  addJobStoreOptions(cmd, a.job);
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
      "  commhost status --master $MASTER_ADDR:$MASTER_PORT --store torch_tcp   a torchrun job on the torch bridge\n"
      "Exit status: 0 when every rank is ok, 3 when the summary names a problem, 1 on an error.\n"
      "Ranks publish once per supervisor.heartbeat.interval; a query reads the store only.");
  cmd->callback([] {
    if (a.job.master.empty()) a.job.master = masterFromEnvironment();
    const auto store = connectMaster(a.job, std::chrono::seconds(5), "commhost status");
    const int rc = a.watch ? watch(a, *store) : showOnce(a, *store);
    if (rc) throw CLI::RuntimeError(rc);
  });
}

}  // namespace commhost::cli
