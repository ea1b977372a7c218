// SPDX-License-Identifier: Apache-2.0
// FlightRecorder: a bounded ring of the last collectives of every group in this process.
//
// Threading: every method may be called from any thread. A SpinLock guards the ring (held
// on the per-op path for the writes of one fixed-size record, no allocation while it is
// held; collect() copies a bounded batch under it, snapshot() for a dump the whole ring,
// during which writers spin, then yield); a Mutex guards the rare records (swaps,
// membership changes, shadow comparisons), whose strings allocate.
// Memory: entries x sizeof(OpRecord), fixed at construction.
#pragma once

#include <chrono>

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "commhost/flight_dump.h"
#include "commhost/mutex.h"
#include "commhost/types.h"
#include "spin_lock.h"

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
  uint64_t generation = 0;  // the group's config generation the op was routed by
  DType dtype = DType::Float32;
  int64_t bytes = 0;
  int64_t numel = 0;
  OpState state = OpState::Started;
  int64_t scheduledUs = 0;  // wall clock (us since the epoch), comparable across ranks
  int64_t startedUs = 0;    // when the backend returned the work
  int64_t endedUs = 0;      // 0 while in flight
  // The op's time on its device (Work::deviceMs(): between the backend's events around
  // its kernels), -1 when unknown: cpu backends, untimed or failed device works.
  double deviceMs = -1;
  char error[240] = {};
};

void copyName(char* dst, size_t size, const std::string& src);
int64_t wallMicros();
// The wall-clock time of a steady-clock reading, through an offset the heartbeat thread
// refreshes: the per-op path reads one clock instead of two (clock reads are a fifth
// of the supervisor's cost per op on a VM).
int64_t wallMicros(std::chrono::steady_clock::time_point t);
void refreshWallClockOffset();

// Swaps, membership changes and shadow comparisons are rare, so their records keep
// strings: SwapRecord, MembershipRecord and ShadowEvent are the dump schema's own types
// (commhost/flight_dump.h). The recorder keeps the last kSwapEntries swaps, as many
// membership changes, and the last kShadowEntries comparisons.
constexpr size_t kSwapEntries = 256;
constexpr size_t kShadowEntries = 1024;

class FlightRecorder {
 public:
  // `entries` 0: records nothing (add returns id 0, finish(0) does nothing); swaps and
  // shadow comparisons are kept all the same.
  explicit FlightRecorder(size_t entries);
  // Stores the record in the next slot (overwriting the oldest) and returns its id.
  uint64_t add(const OpRecord& record);
  // The same without a record on the caller's stack (the per-op path): `fill(OpRecord&)`
  // runs under the lock on the slot itself, after its error is cleared and before its id
  // is set; it must set every other field (supervisor.cc's static_assert on the size is
  // the reminder when a field is added).
  template <class Fill> uint64_t emplace(Fill&& fill) {
    if (capacity_ == 0) return 0;
    SpinLockHold hold(&ringLock_);
    const uint64_t id = nextId_++;
    OpRecord& slot = ring_[nextSlot_];  // id % size, without a division on every op
    if (++nextSlot_ == capacity_) nextSlot_ = 0;
    slot.error[0] = '\0';
    fill(slot);
    slot.id = id;
    return id;
  }
  // Updates the record with this id, if the ring still holds it; `deviceMs` < 0: unknown.
  void finish(uint64_t id, OpState state, int64_t endedUs, const std::string& error, double deviceMs = -1);
  std::vector<OpRecord> snapshot() const;  // oldest first
  // For readers that follow the ring (the status publisher's op statistics): appends to
  // `out` the records with ids from `from` on that the ring still holds, at most `max` (the
  // lock is held for one copy of that many), oldest first. Returns the id to start from
  // next time; `*missed` grows by the ids overwritten before they were read.
  uint64_t collect(uint64_t from, size_t max, std::vector<OpRecord>& out, uint64_t* missed) const;
  // The record with this id, if the ring still holds it.
  bool find(uint64_t id, OpRecord& out) const;
  void addSwap(SwapRecord record);
  std::vector<SwapRecord> swaps() const;  // oldest first
  void addMembership(MembershipRecord record);
  std::vector<MembershipRecord> memberships() const;  // oldest first
  void addShadow(ShadowEvent event);
  std::vector<ShadowEvent> shadows() const;  // oldest first
  size_t capacity() const { return capacity_; }

 private:
  mutable SpinLock ringLock_;
  mutable Mutex mutex_;
  const size_t capacity_;  // ring_'s size, fixed at construction: read without a lock
  std::vector<OpRecord> ring_ GUARDED_BY(ringLock_);
  uint64_t nextId_ GUARDED_BY(ringLock_) = 1;
  size_t nextSlot_ GUARDED_BY(ringLock_);                        // nextId_ % capacity_ (when capacity_ > 0)
  std::deque<SwapRecord> swaps_ GUARDED_BY(mutex_);              // at most kSwapEntries
  std::deque<ShadowEvent> shadows_ GUARDED_BY(mutex_);           // at most kShadowEntries
  std::deque<MembershipRecord> memberships_ GUARDED_BY(mutex_);  // at most kSwapEntries
};

// The record as the dump schema holds it (names for the enums, the arrays as strings).
DumpOp toDumpOp(const OpRecord& r);

}  // namespace commhost::supervisor
