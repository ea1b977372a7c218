// SPDX-License-Identifier: Apache-2.0
// The watchdog: its thread completes works, turns deadlines passed and peers lost into
// incidents (desync report, dumps from every rank, the verdict), and applies on_error.
#pragma once

#include <atomic>
#include <exception>
#include <memory>
#include <string>
#include <thread>

#include "clock.h"
#include "commhost/errors.h"
#include "commhost/logging.h"
#include "group_monitor.h"
#include "supervised_work.h"

namespace commhost::supervisor {

class Supervisor;
class SigtermWatch;  // supervisor.h

class Watchdog {
 public:
  explicit Watchdog(Supervisor& sup);  // starts the thread
  ~Watchdog();                         // stops and joins it (out of line: SigtermWatch is opaque here)
  uint64_t ticks() const { return ticks_.load(std::memory_order_relaxed); }
  bool onThread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  void loop();
  void pollOnce();
  // An incident for `work` (deadline passed, peer lost, or a backend error `cause`): the
  // group's handshake when it is fresh (publishIncident), then the verdict (judge).
  void raiseIncident(SupervisedWork& work, const std::exception_ptr& cause);
  // Publishes a fresh incident and the peers known lost to the group's incident log, dumps,
  // gives the peers a second to dump too, and returns the desync report.
  std::string publishIncident(GroupMonitor& g, const OpContext& ctx);
  // Waits up to a second (real time) for the peers expected to dump for incident `id`,
  // answering theirs meanwhile; then up to a heartbeat and a second more for those of them
  // whose progress looks behind `seq` (awaitLateProgress), so the report is fresh.
  void waitForPeerDumps(GroupMonitor& g, int64_t id, int64_t raisedAtMs, bool published, uint64_t seq);
  // The work's verdict, `message`, and what on_error / on_peer_loss make of it.
  void judge(SupervisedWork& work, ErrorContext where, const std::string& message, bool peerLost);
  // A peer of `g` is lost while a caller is inside a backend call: abort the backends.
  void failBackendCall(GroupMonitor& g);
  // supervisor.on_sigterm: report: what each group was doing, a dump, then the end.
  [[noreturn]] void reportSigterm();

  Supervisor& sup_;
  Ticker ticker_;
  std::atomic<uint64_t> ticks_{0};         // rounds done; the heartbeat checks that it moves
  TimePoint lastErrorDump_{};              // this thread only
  std::unique_ptr<SigtermWatch> sigterm_;  // set when supervisor.on_sigterm is report
  std::thread thread_;                     // last: starts once the members above exist
};

// supervisor.on_error for a failed collective of `g` (watchdog or heartbeat thread); unless
// it is `report`, a Failed launch report with `code` goes to the launcher first.
void applyOnError(GroupMonitor& g, const std::string& message, Logger& logger, ErrorCode code);

}  // namespace commhost::supervisor
