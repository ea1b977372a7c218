// SPDX-License-Identifier: Apache-2.0
// Desync detection through the group's store: each rank's published progress (what it
// last issued and completed), the report that explains a hang from it, and the
// check_collectives fingerprint comparison.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <set>
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

// The ranks of `among` whose published progress says they have not issued collective
// `seq` (a rank with no progress published is not among them).
std::set<int> ranksBehind(GroupMonitor& g, uint64_t seq, const std::set<int>& among);

// Before the report names them: a rank of `silent` (it has not answered this incident)
// that looks behind `seq` may only be late to publish, its heartbeat not having run since
// it issued `seq` (its process not scheduled for a while, as on a loaded machine). Waits,
// up to `patience` of real time, while one looks behind; `heard` runs between reads
// (answering incidents meanwhile) and returns the ranks that answered, no longer waited
// for: their progress is fresh. A rank truly behind answers at once and costs no wait.
void awaitLateProgress(GroupMonitor& g, uint64_t seq, std::set<int> silent, std::chrono::milliseconds patience,
                       const std::function<std::set<int>()>& heard);

// debug.check_collectives: every rank publishes `fingerprint` for `seq` and compares
// all of them; throws InvalidArgument naming the ranks that differ (the same error on
// every rank, before anything is sent), or TimeoutError naming ranks that never came.
void checkFingerprints(GroupMonitor& g, uint64_t seq, OpType op, const std::string& fingerprint,
                       std::chrono::milliseconds timeout);

// "0, 2 and 3" (group ranks, with global ranks when they differ).
std::string rankList(const GroupMonitor& g, const std::vector<int>& ranks);

}  // namespace commhost::supervisor
