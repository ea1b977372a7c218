// SPDX-License-Identifier: Apache-2.0
// OpRecord: one op as the flight recorder keeps it (flight_recorder.h, thread_lanes.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "commhost/types.h"

namespace commhost::supervisor {

// The size classes of the op statistics: upper bounds in bytes (the last class has none).
constexpr int64_t kSizeClassBytes[] = {1024, 65536, 1 << 20, 16 << 20};
constexpr size_t kNumSizeClasses = sizeof(kSizeClassBytes) / sizeof(kSizeClassBytes[0]) + 1;
inline uint8_t sizeClassOf(int64_t bytes) {
  uint8_t c = 0;
  while (c < kNumSizeClasses - 1 && bytes > kSizeClassBytes[c]) ++c;
  return c;
}

enum class OpState : uint8_t { Started, Completed, Failed };
const char* opStateName(OpState s);

// Fixed-size so recording never allocates; names longer than the arrays are cut.
struct OpRecord {
  // The shared ring's handle (process-wide, increasing: what finish() takes); 0 for an
  // empty slot and for a record in a thread's lane (ThreadLanes).
  uint64_t id = 0;
  // The order of recording, across the ring and the lanes: increasing in each thread;
  // two threads recording at once may get one order, or briefly out of step (a
  // shared counter advanced without a locked instruction). The dump's id.
  uint64_t order = 0;
  char group[48] = {};
  char backend[24] = {};
  int rank = 0;
  int worldSize = 0;
  OpType op = OpType::Allreduce;
  uint64_t seq = 0;
  uint64_t generation = 0;  // the group's config generation the op was routed by
  DType dtype = DType::Float32;
  int64_t bytes = 0;
  int64_t numel = 0;
  OpState state = OpState::Started;
  // false (Supervisor::timesOp: a small op run inline, not sampled): the three times are
  // one, not the op's own, and the op has no latency to count. In a thread's lane: the
  // later of that thread's last timed op (at most time_every ops before) and the heartbeat
  // thread's last clock reading (normally under 100 ms old); in the ring, the coarse
  // clock's.
  bool timed = true;
  // Counted already, by its thread lane's count cell (ThreadLanes::Count): the op
  // statistics take only its latency. False for the ring's records and for a lane's whose
  // key found no cell.
  bool counted = false;
  int64_t scheduledUs = 0;  // wall clock (us since the epoch), comparable across ranks
  int64_t startedUs = 0;    // when the backend returned the work
  int64_t endedUs = 0;      // 0 while in flight
  // The op's time on its device (Work::deviceMs(): between the backend's events around
  // its kernels), -1 when unknown: cpu backends, untimed or failed device works.
  double deviceMs = -1;
  char error[232] = {};
};

// Copies `src` into the `size`-byte array `dst`, NUL-terminated, cut at a character
// boundary when it does not fit. Inline for the common case (it fits): it runs twice on
// every op's record.
void copyNameCut(char* dst, size_t size, const std::string& src);
inline void copyName(char* dst, size_t size, const std::string& src) {
  if (src.size() < size) {
    std::memcpy(dst, src.c_str(), src.size() + 1);  // with its NUL
    return;
  }
  copyNameCut(dst, size, src);
}

}  // namespace commhost::supervisor
