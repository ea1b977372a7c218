// SPDX-License-Identifier: Apache-2.0
// The process launcher behind `commhost run`: starts the local ranks with the
// launch environment, relays their output line by line with a "[rank] " prefix, and
// stops the job when a rank fails or the launcher is told to stop.
//
// Threading: one thread (the caller's) does everything: a poll loop over the ranks'
// output pipes, a signalfd for SIGCHLD/SIGINT/SIGTERM (and SIGHUP with --watch), an
// inotify fd with --watch, and timers for the grace period. Other threads of the process
// (a plugin probe's, such as the CUDA driver's) are allowed: those signals, wherever the
// kernel delivers them, are forwarded to the caller's thread while launch() runs.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace commhost::cli {

struct LaunchPlan {
  int localRanks = 1;
  int nodes = 1;
  int nodeRank = 0;
  std::string masterAddr = "127.0.0.1";
  int masterPort = 0;      // 0: pick a free port (single node only)
  std::string configPath;  // absolute; "" = the program's default
  // configPath's text as read once at launch, handed to the ranks (COMMHOST_CONFIG_TEXT) so
  // that all start on it even if the file is edited as they start; "" (or over 64 KiB,
  // beyond what an environment variable may hold): the ranks read the file.
  std::string configText;
  std::vector<std::string> overrides;                         // --set key=value, passed as COMMHOST_OVERRIDES
  std::vector<std::string> command;                           // program and arguments
  std::chrono::milliseconds grace{std::chrono::seconds(5)};   // SIGTERM -> SIGKILL
  std::chrono::milliseconds settle{std::chrono::seconds(1)};  // first failure -> SIGTERM
  // --watch: a file whose edits (inotify on its folder, matched by name, so an editor
  // that replaces the file by rename is seen too) and SIGHUP call onConfigChange with
  // "edited" / "SIGHUP", on the launcher's thread, and once the ranks are started with
  // "edited as the job started" (an edit before the watch began has no event; an unchanged
  // file is no change). Empty: SIGHUP keeps its default.
  std::string watchPath;
  // supervisor.on_peer_loss: shrink. A rank that fails does not stop the job: the others
  // shrink their groups without it (ProcessGroup::shrink) and go on. The job ends when
  // every rank has exited; its status is 0 when some rank finished with 0 (the survivors
  // did), else the first failure's. The summary names the ranks lost.
  bool keepGoing = false;
  // With keepGoing: a rank that fails is started again, up to this many times per rank,
  // as a process that joins the running job (group.join: the others admit it at their next
  // syncPoint(), which needs group.sync_poll > 0). The summary counts the restarts.
  int maxRestarts = 0;
  std::function<void(const std::string& why)> onConfigChange;
};

// Runs the job and returns the launcher's exit status: 0, the first failing rank's
// exit status, or 128 + its signal (see keepGoing). Prints a summary to stderr when a
// rank fails.
int launch(const LaunchPlan& plan);

// A TCP port that was free a moment ago on this host.
int pickFreePort();

}  // namespace commhost::cli
