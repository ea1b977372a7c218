// Desync detection through the group's store: each rank's published progress (what it
// last issued and completed), the report that explains a hang from it, and the
// check_collectives fingerprint comparison.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "supervisor.h"

namespace commhost::supervisor {

// Store keys under the group's store.
std::string progressKey(int rank);
std::string heartbeatKey(int rank);
std::string leftKey(int rank);  // set when the rank destroys its group: its silence is not a loss
// The incident log: one wire::Incident or wire::PeerLost line per entry (messages.h), and
// the count of lines appended so far (readers look at the log when the count moves).
// Bounded: once kMaxIncidentLines lines are counted, ranks append no more (the count may
// pass the bound by the ranks racing to append, one line each); incidents go on locally
// (dump, verdict, on_error) without asking peers to dump, and the rank that finds the
// log full logs that once. Lines are at most ~560 bytes, so the log stays under 2.5 MiB.
constexpr const char* kIncidentLog = "supervisor/incidents";
constexpr const char* kIncidentCount = "supervisor/incident_count";
constexpr int64_t kMaxIncidentLines = 4096;
// Ranks append wire::encodeAck(their rank) to ackKey(RANK, K) once they dumped for RANK's K-th incident.
std::string ackKey(int rank, int64_t incident);
// Appends `lines` (encoded messages) to the incident log and counts them, unless that
// would pass kMaxIncidentLines: then appends nothing and returns false.
bool appendToIncidentLog(GroupMonitor& g, const std::vector<std::string>& lines);
// In the job's store: `commhost trace dump` requests (a counter) and their reasons (lines).
constexpr const char* kTraceDumpCount = "commhost/trace_dump";
constexpr const char* kTraceDumpReasons = "commhost/trace_dump/reasons";

// Watchdog thread, while raising incident K: the peers known to have dumped for it, those
// that acked it and those that raised an incident of their own within `window` of
// `raisedAtMs` (they dumped then; they may have exited since, without acking).
std::set<int> peersThatDumped(GroupMonitor& g, int64_t incident, int64_t raisedAtMs, int64_t windowMs);

// Heartbeat thread: publishes this rank's progress.
void publishProgress(GroupMonitor& g);

// Reads every rank's progress and says, in sentences, which ranks never joined
// collective `seq` (and where they are instead) and which are waiting in it.
std::string desyncReport(GroupMonitor& g, uint64_t seq, OpType op);

// debug.check_collectives: every rank publishes `fingerprint` for `seq` and compares
// all of them; throws InvalidArgument naming the ranks that differ (the same error on
// every rank, before anything is sent), or TimeoutError naming ranks that never came.
void checkFingerprints(GroupMonitor& g, uint64_t seq, OpType op, const std::string& fingerprint,
                       std::chrono::milliseconds timeout);

// "0, 2 and 3" (group ranks, with global ranks when they differ).
std::string rankList(const GroupMonitor& g, const std::vector<int>& ranks);

}  // namespace commhost::supervisor
