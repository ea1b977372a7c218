// SPDX-License-Identifier: Apache-2.0
// The heartbeat: its thread publishes this rank's heartbeat and progress, notices peers
// that stopped beating, answers incidents and dump requests, and checks that the
// watchdog still advances.
#pragma once

#include <cstdint>
#include <thread>

#include "clock.h"
#include "group_monitor.h"
#include "status.h"

namespace commhost::supervisor {

class Supervisor;

class Heartbeat {
 public:
  explicit Heartbeat(Supervisor& sup);  // starts the thread
  ~Heartbeat();                         // stops and joins it
  bool onThread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  void loop();
  void tick();
  void beat(GroupMonitor& g, TimePoint now);
  void answerIncidents(GroupMonitor& g);
  void reportWatchdogStall(Millis stalled);

  Supervisor& sup_;
  Ticker ticker_;
  // This thread only.
  uint64_t lastTicks_ = 0;      // the watchdog's ticks when last seen moving
  TimePoint lastAdvance_{};     // when that was
  int64_t seenTraceDump_ = -1;  // `commhost trace dump` requests seen; -1 = not read yet
  // When to read the request count next: once per heartbeat interval, not every tick (an
  // operator's request waits at most that long, and the store serves one call less per
  // rank and tick: at 256 ranks a poll every tick was nearly half of all store calls).
  TimePoint nextTraceCheck_{};
  bool watchdogStallReported_ = false;
  StatusPublisher status_;  // this thread's
  std::thread thread_;      // last: starts once the members above exist
};

// Publishes to the log, once per group, that its incident log is full (any thread).
void noteIncidentLogFull(GroupMonitor& g, Logger& logger);

}  // namespace commhost::supervisor
