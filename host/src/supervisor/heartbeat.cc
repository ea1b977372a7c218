// SPDX-License-Identifier: Apache-2.0
#include "heartbeat.h"

#include <algorithm>

#include "commhost/errors.h"
#include "commhost/sdk/option_schema.h"
#include "desync.h"
#include "incident_channel.h"
#include "messages.h"
#include "supervisor.h"
#include "watchdog.h"

namespace commhost::supervisor {
namespace {

// An incident keeps the watchdog busy up to a second waiting for peers' dumps, plus the
// store round trips of the desync report: not a stall.
constexpr Millis kLongestIncident{5000};

// Each rank watches the next two ranks (ring order): every rank is watched by two
// others, and the store serves O(world) reads per interval, not O(world^2).
std::vector<int> peersToWatch(int rank, int worldSize) {
  std::vector<int> out;
  for (int d = 1; d <= 2 && d < worldSize; ++d) {
    const int peer = (rank + d) % worldSize;
    if (peer != rank && (out.empty() || out[0] != peer)) out.push_back(peer);
  }
  return out;
}

}  // namespace

Heartbeat::Heartbeat(Supervisor& sup)
    : sup_(sup), ticker_(sup.sharedClock()), status_(sup), thread_([this] { loop(); }) {
  // Before any op: the first ops of a group created long after the library was loaded are
  // stamped from this reading until the first tick (flight_recorder.h, recentWallMicros).
  refreshWallClockOffset();
}

Heartbeat::~Heartbeat() {
  ticker_.stop();
  thread_.join();
}

void Heartbeat::loop() {
  const Millis tick = std::min(sup_.settings().heartbeatInterval, Millis(100));
  lastTicks_ = sup_.watchdogTicks();
  lastAdvance_ = ticker_.clock().now();
  for (;;) {
    const auto asleep = ticker_.clock().now();
    if (!ticker_.wait(tick)) break;
    // A wake-up seconds late means the whole process was not scheduled: the watchdog
    // could not advance either, and no backend call is to blame.
    const auto now = ticker_.clock().now();
    if (sup_.pauses().noteAlive(asleep, now, tick)) lastAdvance_ = now;
    try {
      this->tick();
    } catch (...) {
      sup_.logUnexpected("heartbeat", std::current_exception());  // and go on beating
    }
  }
}

bool PauseDetector::noteAlive(TimePoint asleep, TimePoint now, Millis expected) {
  // A thread that slept `expected` but woke seconds later was not run at all (SIGSTOP, a
  // debugger, a suspended VM, a starved host): measured on the sleep alone, so a slow
  // store call or backend poll in between is never taken for it.
  const auto late = std::chrono::duration_cast<Millis>(now - asleep - expected);
  const Millis threshold = std::max(Millis(2000), poll_ * 20);
  if (late <= threshold) return false;
  // The heartbeat and watchdog both wake late after one pause: the first says so, before
  // any verdict it gives, so that the log explains the verdict.
  const int64_t nowNs = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  int64_t reported = lastReport_.load(std::memory_order_relaxed);
  if (nowNs - reported < std::chrono::duration_cast<std::chrono::nanoseconds>(threshold).count() ||
      !lastReport_.compare_exchange_strong(reported, nowNs))
    return true;
  logger_->warn("this process was not scheduled for " + formatDuration(late) +
                " (stopped by a signal or a debugger, or the machine was suspended or overloaded): its "
                "heartbeat and watchdog stood still meanwhile, so its peers may have declared it lost and "
                "works in flight may have passed their deadline. Next: if nobody stopped it on purpose, "
                "look for what starves this host (load, swap, the VM's steal time)");
  return true;
}

void Heartbeat::tick() {
  const Settings& settings = sup_.settings();
  const auto now = ticker_.clock().now();
  refreshWallClockOffset();  // follows NTP's steps of the wall clock
  if (takeSigusr1() || sup_.takeSignalDump()) sup_.dump("SIGUSR1");

  const uint64_t ticks = sup_.watchdogTicks();
  if (ticks != lastTicks_) {
    lastTicks_ = ticks;
    lastAdvance_ = now;
  } else if (now - lastAdvance_ > std::max({settings.heartbeatTimeout, settings.poll * 20, kLongestIncident}) &&
             !watchdogStallReported_) {
    watchdogStallReported_ = true;
    reportWatchdogStall(std::chrono::duration_cast<Millis>(now - lastAdvance_));
  }

  const auto groups = sup_.groups();
  bool traceChecked = false;
  for (const auto& g : groups) {
    if (g->storeLost.load(std::memory_order_acquire)) continue;
    try {
      if (!traceChecked && g->jobStore && now >= nextTraceCheck_) {
        traceChecked = true;
        nextTraceCheck_ = now + settings.heartbeatInterval;
        const int64_t requests = g->jobStore->add(kTraceDumpCount, 0);
        if (requests > seenTraceDump_) {
          if (seenTraceDump_ >= 0) {
            // The last reason given (requestTraceDump appends one line per request).
            std::string reasons = toString(g->jobStore->get(kTraceDumpReasons));
            while (!reasons.empty() && reasons.back() == '\n') reasons.pop_back();
            sup_.dump("commhost trace dump: " + reasons.substr(reasons.rfind('\n') + 1));
          }
          seenTraceDump_ = requests;
        }
      }
      answerIncidents(*g);
      if (now >= g->heartbeat.nextBeat) {
        g->heartbeat.nextBeat = now + settings.heartbeatInterval;
        beat(*g, now);
      }
    } catch (const std::exception& e) {
      // The store lives in rank 0's process (or a standalone server): losing it means
      // losing the job's control plane. Said at once, not at the next op that needs the
      // store (an etcd killed or full was silent for 20 s).
      g->storeLost.store(true, std::memory_order_release);
      g->markLost(-1, std::string("the store stopped answering heartbeats (") + e.what() +
                          "); the rank serving it (usually 0) may have died");
      // With an op in flight the job is mid-collective without its control plane:
      // on_error applies. With none, the rank may be finishing after rank 0 (which serves
      // the store) has exited, the normal end of a job: said, without ending anything.
      const bool inFlight = g->lastIssued.load(std::memory_order_acquire) >
                                g->lastCompleted.load(std::memory_order_acquire) ||
                            g->callInBackend().seq != 0;
      const std::string checkStore =
          "check the store server (rank 0's process, `commhost store serve`, or the etcd endpoints: up, reachable, "
          "not out of space)";
      const std::string message =
          "[group " + g->name + " rank " + std::to_string(g->rank) +
          "] the job's store failed this rank's heartbeat (" + e.what() +
          "); the rank serving it (usually 0) may have died. From now on this group has no heartbeats, desync "
          "reports, trace dumps or swaps. " +
          (inFlight ? "Next: " + checkStore + ", then restart the job"
                    : "No op is in flight: if the job is finishing (rank 0 done first), nothing is wrong; otherwise " +
                          checkStore);
      if (!inFlight) {
        sup_.logger().warn(message);
        continue;
      }
      sup_.logger().error(message);
      applyOnError(*g, message, sup_.logger(), ErrorCode::Store);
    }
  }
  try {
    status_.tick(now, groups);
  } catch (const std::exception&) {
    // A store that fails here fails the next beat too, which says so and marks it lost
    // (this record waits for nothing: a job does not end for want of a status).
  }
}

void Heartbeat::beat(GroupMonitor& g, TimePoint now) {
  const Settings& settings = sup_.settings();
  GroupMonitor::HeartbeatView& h = g.heartbeat;
  if (h.watched.empty() && g.worldSize > 1) {
    h.watched = peersToWatch(g.rank, g.worldSize);
    h.watchedBeat.assign(h.watched.size(), -1);
    h.watchedSince.assign(h.watched.size(), now);
    h.watchedLeft.assign(h.watched.size(), false);
  }
  g.store->add(heartbeatKey(g.rank), 1);
  publishProgress(g);
  for (size_t i = 0; i < h.watched.size(); ++i) {
    const int peer = h.watched[i];
    const int64_t beatNow = g.store->add(heartbeatKey(peer), 0);
    if (beatNow != h.watchedBeat[i]) {
      h.watchedBeat[i] = beatNow;
      h.watchedSince[i] = now;
      continue;
    }
    const auto silent = std::chrono::duration_cast<Millis>(now - h.watchedSince[i]);
    if (silent <= settings.heartbeatTimeout || h.watchedLeft[i] || g.isLost(peer)) continue;
    if (g.store->check({leftKey(peer)})) {  // it destroyed the group: done, not lost
      h.watchedLeft[i] = true;
      g.markLeft(peer);
      continue;
    }
    const std::string why = "no heartbeat for " + formatDuration(silent) + " (heartbeat.timeout " +
                            formatDuration(settings.heartbeatTimeout) + "), noticed by rank " +
                            std::to_string(g.globalRank(g.rank));
    sup_.logger().error("[group " + g.name + " rank " + std::to_string(g.rank) + "] peer " +
                        std::to_string(g.globalRank(peer)) + " lost: " + why);
    g.markLost(peer, why);
    // Tell the ranks that do not watch this peer.
    if (!appendToIncidentLog(g, {wire::encode(wire::PeerLost{g.rank, peer, why})}))
      noteIncidentLogFull(g, sup_.logger());
  }
}

// Another rank raised an incident: publish progress for its report, dump, acknowledge.
void Heartbeat::answerIncidents(GroupMonitor& g) {
  g.incidents.answer(g, sup_.logger(), [&] {
    publishProgress(g);
    sup_.dump("incident raised by another rank of group " + g.name);
  });
}

void noteIncidentLogFull(GroupMonitor& g, Logger& logger) {
  if (g.incidentLogFull.exchange(true)) return;
  logger.error(ErrorContext{g.name, g.rank}.format() + "the group's incident log in the store is full (" +
               std::to_string(kMaxIncidentLines) +
               " lines): from now on this rank's incidents and lost "
               "peers are handled here only, without asking the other ranks to dump. Next: this group has "
               "failed thousands of times; re-create it (a new group starts a new log)");
}

void Heartbeat::reportWatchdogStall(Millis stalled) {
  const auto oldest = sup_.oldestInFlight();  // the likeliest to be the one asked
  std::string suspect;
  if (oldest) {
    const GroupMonitor& g = *oldest->group();
    suspect = " The oldest work in flight is [group " + g.name + " rank " + std::to_string(g.rank) + "] " +
              opName(oldest->context().op) + " seq " + std::to_string(oldest->context().seq) + " on backend " +
              oldest->backend + ".";
  }
  const std::string message = "the supervisor's watchdog has not advanced for " + formatDuration(stalled) +
                              ": a backend call it made (isCompleted) is blocked. Works are no longer timed out." +
                              suspect + " Next: report the backend's blocking call to its author";
  sup_.logger().error(message);
  sup_.dump("watchdog stalled");
  for (const auto& g : sup_.groups()) applyOnError(*g, message, sup_.logger(), ErrorCode::Backend);
}

}  // namespace commhost::supervisor
