// SPDX-License-Identifier: Apache-2.0
// FlightRecorder: a bounded ring of the last collectives of every group in this process.
//
// Threading: every method may be called from any thread; one mutex guards the ring
// (held for a copy of one fixed-size record, no allocation while it is held).
// Memory: entries x sizeof(OpRecord), fixed at construction.
#pragma once

#include <chrono>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "commhost/types.h"

namespace commhost::supervisor {

enum class OpState : uint8_t { Started, Completed, Failed };
const char* opStateName(OpState s);

// Fixed-size so recording never allocates; names longer than the arrays are cut.
struct OpRecord {
  uint64_t id = 0;  // process-wide, increasing; 0 = empty slot
  char group[48] = {};
  char backend[24] = {};
  int rank = 0;
  int worldSize = 0;
  OpType op = OpType::Allreduce;
  uint64_t seq = 0;
  DType dtype = DType::Float32;
  int64_t bytes = 0;
  int64_t numel = 0;
  OpState state = OpState::Started;
  int64_t scheduledUs = 0;  // wall clock (us since the epoch), comparable across ranks
  int64_t startedUs = 0;    // when the backend returned the work
  int64_t endedUs = 0;      // 0 while in flight
  char error[240] = {};
};

void copyName(char* dst, size_t size, const std::string& src);
int64_t wallMicros();
// The wall-clock time of a steady-clock reading, through an offset the heartbeat thread
// refreshes: the per-op path reads one clock instead of two (clock reads are a fifth
// of the supervisor's cost per op on a VM).
int64_t wallMicros(std::chrono::steady_clock::time_point t);
void refreshWallClockOffset();

class FlightRecorder {
 public:
  explicit FlightRecorder(size_t entries);
  // Stores the record in the next slot (overwriting the oldest) and returns its id.
  uint64_t add(const OpRecord& record);
  // Updates the record with this id, if the ring still holds it.
  void finish(uint64_t id, OpState state, int64_t endedUs, const std::string& error);
  std::vector<OpRecord> snapshot() const;  // oldest first
  size_t capacity() const { return ring_.size(); }

 private:
  mutable std::mutex mutex_;
  std::vector<OpRecord> ring_;
  uint64_t nextId_ = 1;
};

nlohmann::json recordToJson(const OpRecord& r);

}  // namespace commhost::supervisor
