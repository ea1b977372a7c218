// SPDX-License-Identifier: Apache-2.0
// OpStats: what this process's collectives did, per (group, op, backend, size class):
// counts, bytes and a latency histogram, for `commhost status`, `commhost top` and the
// Prometheus endpoint. Aggregated by the heartbeat thread from the flight recorder: the
// ring's records, the lanes' per-key counts (kept by the per-op path: two plain
// increments) and a bounded number of the lanes' newest records for the latency; a cell
// is made the first time its key is seen, off the per-op path, and has a fixed size from
// then on.
//
// Threading: heartbeat thread only (OpStatsCollector owns its OpStats).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "flight_recorder.h"

namespace commhost::supervisor {

// Upper bounds of the latency buckets, in microseconds (the last bucket is +Inf): 1-2-5
// steps from 1 us to 10 s, fine enough for `commhost top`'s p50/p99 (read within a bucket).
constexpr std::array<int64_t, 22> kLatencyBucketsUs = {
    1,    2,     5,     10,    20,     50,     100,    200,     500,     1000,    2000,
    5000, 10000, 20000, 50000, 100000, 200000, 500000, 1000000, 2000000, 5000000, 10000000};
// "le1KiB", "le64KiB", "le1MiB", "le16MiB", "gt16MiB" (op_record.h's size classes): a
// Prometheus label value.
const char* sizeClassName(size_t sizeClass);

struct OpCell {
  uint64_t completed = 0, failed = 0;
  uint64_t bytes = 0;  // of the completed ones
  // The completed ones with a latency (OpRecord::timed): what latencySumUs and buckets
  // count. A sample of the small ops (supervisor.flight_recorder.time_every).
  uint64_t timed = 0;
  uint64_t latencySumUs = 0;                                     // issue to completion, of the timed ones
  std::array<uint64_t, kLatencyBucketsUs.size() + 1> buckets{};  // not cumulative; last: +Inf
};

struct OpKey {
  std::string group;
  OpType op = OpType::Allreduce;
  std::string backend;
  size_t sizeClass = 0;
  bool operator<(const OpKey& o) const {
    return std::tie(group, op, backend, sizeClass) < std::tie(o.group, o.op, o.backend, o.sizeClass);
  }
};

class OpStats {
 public:
  // At most this many cells; later keys count in `overflow` (a job with thousands of
  // groups would otherwise grow the status without bound).
  static constexpr size_t kMaxCells = 2048;
  // An op of the ring that ended: counted, and its latency when timed.
  void add(const OpRecord& finished);
  // An op of a lane (counted by addCompleted): its latency, when timed.
  void addLatency(const OpRecord& completed);
  // `ops` more completed ops of this key, of `bytes` in all.
  void addCompleted(const std::string& group, OpType op, const std::string& backend, size_t sizeClass, uint64_t ops,
                    uint64_t bytes);
  void addMissed(uint64_t n) { missed_ += n; }
  const std::map<OpKey, OpCell>& cells() const { return cells_; }
  uint64_t missed() const { return missed_; }
  uint64_t overflow() const { return overflow_; }
  // {"cells": [{group, op, backend, size_class, completed, failed, bytes, timed, latency_sum_us,
  //   buckets: [...]}], "missed": N, "overflow": N, "latency_buckets_us": [...]}
  nlohmann::json toJson() const;

 private:
  std::map<OpKey, OpCell> cells_;
  OpCell* cell(const std::string& group, OpType op, const std::string& backend, size_t sizeClass);
  void addLatencyTo(OpCell& c, const OpRecord& r);

  uint64_t missed_ = 0;    // ops that left the ring before they were read (no labels known)
  uint64_t overflow_ = 0;  // ops whose key found no room
};

// Follows the flight recorder: each poll() adds the records that ended since the last.
class OpStatsCollector {
 public:
  void poll(const FlightRecorder& recorder);
  const OpStats& stats() const { return stats_; }

 private:
  static constexpr size_t kBatch = 256;  // records copied per lock hold
  // Per poll, the newest records of each thread lane read for their latency (the lanes'
  // counts give the ops and bytes): with time_every 64, 16 timed ops a poll (and each
  // group's first since the heartbeat's tick); only those are converted (OpRecord).
  static constexpr size_t kLaneRecords = 1024;
  static constexpr size_t kMaxPending = 4096;  // works still running that poll() will look at again
  uint64_t next_ = 1;
  std::vector<uint64_t> pending_;   // ids seen while still running
  std::vector<uint64_t> laneNext_;  // per thread lane: the number of the next record to read
  // Per thread lane and count cell: the ops and bytes added so far.
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> laneCounted_;
  uint64_t uncountedRead_ = 0;  // lane records read that no count cell had counted
  uint64_t unlabelled_ = 0;     // of the lanes' uncounted ops, those added as missed
  void pollLanes(const FlightRecorder& recorder);
  OpStats stats_;
};

}  // namespace commhost::supervisor
