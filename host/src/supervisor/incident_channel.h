// SPDX-License-Identifier: Apache-2.0
// The cross-rank incident protocol over a group's store: one rank raises an incident
// (appends it to the group's incident log), every other rank dumps its flight recorder
// and acknowledges it; a rank that finds a peer lost tells the ranks that do not watch
// that peer. Messages are the codec's (messages.h).
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "commhost/logging.h"
#include "commhost/mutex.h"

namespace commhost::supervisor {

struct GroupMonitor;

// The incident log: one wire::Incident or wire::PeerLost line per entry, and the count
// of lines appended so far (readers look at the log when the count moves).
// Bounded: once kMaxIncidentLines lines are counted, ranks append no more (the count may
// pass the bound by the ranks racing to append, one batch each); incidents go on locally
// (dump, verdict, on_error) without asking peers to dump, and the rank that finds the
// log full logs that once. Lines are at most ~560 bytes, so the log stays under 2.5 MiB.
constexpr const char* kIncidentLog = "supervisor/incidents";
constexpr const char* kIncidentCount = "supervisor/incident_count";
constexpr int64_t kMaxIncidentLines = 4096;
// Ranks append wire::encodeAck(their rank) to ackKey(RANK, K) once they dumped for
// RANK's K-th incident.
std::string ackKey(int rank, int64_t incident);

// Appends `lines` (encoded messages) to the incident log and counts them, unless that
// would pass kMaxIncidentLines: then appends nothing and returns false.
bool appendToIncidentLog(GroupMonitor& g, const std::vector<std::string>& lines);

// Watchdog thread, while raising incident K: the peers known to have dumped for it, those
// that acked it and those that raised an incident of their own within `window` of
// `raisedAtMs` (they dumped then; they may have exited since, without acking).
std::set<int> peersThatDumped(GroupMonitor& g, int64_t incident, int64_t raisedAtMs, int64_t windowMs);

// One group's reader of the incident log. The heartbeat answers new lines each tick, and
// the watchdog too while it waits for acks to an incident of its own (ranks raising the
// same incident at once wait on each other); a line is answered once.
class IncidentChannel {
 public:
  // Reads the lines not read yet: marks the peers other ranks found lost, and when
  // other ranks raised incidents, calls `beforeAck` once (publish progress, dump), then
  // acknowledges each. Lines that do not decode are logged and skipped.
  void answer(GroupMonitor& g, Logger& logger, const std::function<void()>& beforeAck) EXCLUDES(mu_);

 private:
  Mutex mu_;                          // held across the answer, so two threads never answer one line twice
  int64_t seen_ GUARDED_BY(mu_) = 0;  // lines of the log already answered
};

}  // namespace commhost::supervisor
