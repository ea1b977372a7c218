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
// One line per incident: "incident|RANK|K|what|MS" (RANK's K-th incident, raised at MS
// milliseconds of the system clock; others dump and append "THEIR_RANK," to
// ackKey(RANK, K)) or "peer|RANK|PEER|why" (RANK found PEER lost).
constexpr const char* kIncidentLog = "supervisor/incidents";
constexpr const char* kIncidentCount = "supervisor/incident_count";  // lines appended so far
std::string ackKey(int rank, int64_t incident);
// The "peer|RANK|PEER|why\n" line (field separators and newlines in `why` blanked).
std::string peerLostLine(int rank, int peer, std::string why);
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
