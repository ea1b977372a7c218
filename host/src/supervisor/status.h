// SPDX-License-Identifier: Apache-2.0
// StatusPublisher: the writer of the job status (commhost/job_status.h). The heartbeat
// thread calls tick() on each of its ticks: it follows the flight recorder into the op
// statistics, notes lost peers as events, and once per heartbeat interval builds this
// process's record and writes it to the job's store.
//
// Threading: heartbeat thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "clock.h"
#include "commhost/job_status.h"
#include "group_monitor.h"
#include "op_stats.h"
#include "supervised_work.h"

namespace commhost::supervisor {

class Supervisor;

constexpr const char* kStatusKeyPrefix = "commhost/status/";  // + global rank
constexpr const char* kStatusWorldKey = "commhost/status/world";
std::string statusKey(int globalRank);
std::string encodeStatus(const ProcessStatus& status);  // status_schema.cc: the one writer

class StatusPublisher {
 public:
  explicit StatusPublisher(Supervisor& sup) : sup_(sup) {}
  void tick(TimePoint now, const std::vector<std::shared_ptr<GroupMonitor>>& groups);
  // This process's record now (what tick() publishes).
  ProcessStatus build(TimePoint now, const std::vector<std::shared_ptr<GroupMonitor>>& groups);

 private:
  // `running`: the supervisor's works not finalized yet (all groups').
  GroupStatus groupStatus(GroupMonitor& g, TimePoint now, const std::vector<std::shared_ptr<SupervisedWork>>& running);
  void notePeerLosses(const std::vector<std::shared_ptr<GroupMonitor>>& groups);

  Supervisor& sup_;
  OpStatsCollector ops_;
  TimePoint nextPublish_{};
  double lastCostUs_ = 0;
  bool worldPublished_ = false;
  // Lost peers already turned into events, per monitor (a shrink makes a new monitor).
  std::map<const GroupMonitor*, std::set<int>> lostSeen_;
  // A call inside a backend with no work yet (an inline op): when it was first seen.
  std::map<const GroupMonitor*, std::pair<uint64_t, TimePoint>> inCallSince_;
};

}  // namespace commhost::supervisor
