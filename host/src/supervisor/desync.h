// SPDX-License-Identifier: Apache-2.0
// Desync detection through the group's store: each rank's published progress (what it
// last issued and completed), the report that explains a hang from it, and the
// check_collectives fingerprint comparison.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "commhost/types.h"
#include "group_monitor.h"

namespace commhost::supervisor {

// Store keys under the group's store.
std::string progressKey(int rank);
std::string heartbeatKey(int rank);
std::string leftKey(int rank);  // set when the rank destroys its group: its silence is not a loss
// In the job's store: `commhost trace dump` requests (a counter) and their reasons (lines).
constexpr const char* kTraceDumpCount = "commhost/trace_dump";
constexpr const char* kTraceDumpReasons = "commhost/trace_dump/reasons";

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
