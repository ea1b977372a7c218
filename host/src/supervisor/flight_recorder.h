// SPDX-License-Identifier: Apache-2.0
// FlightRecorder: the last collectives of every group in this process, bounded.
//
// Two stores: a shared ring for ops that go on running after their call (finish() updates
// them), and a lane per issuing thread for ops that completed in their call, the small
// inline ops, written without a lock, one cache line each (thread_lanes.h). A dump merges
// both in the order they were recorded and keeps the last `entries`.
// Threading: every method may be called from any thread. A SpinLock guards the ring (held
// for the writes of one fixed-size record, no allocation while it is held; collect()
// copies a bounded batch under it, snapshot() for a dump the whole ring, during which
// writers spin, then yield); ThreadLanes says how the lanes are shared; a Mutex guards
// the rare records (swaps, membership changes, shadow comparisons), whose strings
// allocate.
// Memory: entries x sizeof(OpRecord) (416 bytes) for the ring, fixed at construction, and
// entries x 64 bytes per issuing thread's lane (made at the thread's first inline op; at
// most 16).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "commhost/flight_dump.h"
#include "commhost/mutex.h"
#include "commhost/types.h"
#include "op_record.h"
#include "spin_lock.h"
#include "thread_lanes.h"

namespace commhost::supervisor {

int64_t wallMicros();
// The wall-clock time of a steady-clock reading, through an offset the heartbeat thread
// refreshes: the per-op path reads one clock instead of two (clock reads are a fifth
// of the supervisor's cost per op on a VM).
int64_t wallMicros(std::chrono::steady_clock::time_point t);
// Also sets recentWallMicros(). Called by the heartbeat thread when it starts and at each
// tick (every 100 ms at most, later while a store call holds it).
void refreshWallClockOffset();
namespace detail {
extern std::atomic<int64_t> recentWallUs;
}  // namespace detail
// The wall clock as refreshWallClockOffset() last read it: an untimed lane record's time
// when the thread's last timed op is older. One load of a line written ten times a second.
inline int64_t recentWallMicros() { return detail::recentWallUs.load(std::memory_order_relaxed); }
// The wall clock's coarse reading (CLOCK_REALTIME_COARSE: the kernel's last tick, 1-4 ms
// steps), for records of ops not timed precisely: ~3 ns, where a precise read is ~9.
int64_t coarseWallMicros();

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
    const uint64_t order = nextOrder();
    const uint64_t id = nextId_++;
    OpRecord& slot = ring_[nextSlot_];  // id % size, without a division on every op
    if (++nextSlot_ == capacity_) nextSlot_ = 0;
    slot.error[0] = '\0';
    fill(slot);
    slot.id = id;
    slot.order = order;
    return id;
  }
  // The same for an op that completed in its call (never finished later), into the
  // calling thread's lane, without a lock: `fill(LaneEntry&)` sets its seq, generation,
  // bytes, times, op, dtype and timed in the slot itself; its names, order and (when
  // untimed) its time are set here. False, with nothing written, when the thread has no
  // lane or `names` is null: the caller records the op into the ring (emplace) instead.
  // Filled in place and always inlined: an entry built on the stack and copied in, or
  // passed to a call, was loaded back with wider loads than its fields were stored with,
  // which the store buffer cannot serve (6-12 ns more per op in BM_AllreduceDispatch).
  template <class Fill> [[gnu::always_inline]] bool emplaceInLane(const RecordNames* names, Fill&& fill) {
    ThreadLanes::Lane* lane = names ? lanes_.mine() : nullptr;
    if (!lane) return false;
    const uint64_t order = nextOrder();
    lanes_.write(*lane, [&](LaneEntry& e) {
      fill(e);
      e.names = names;
      e.order = order;
      // An untimed op's time: the later of the thread's last timed op (time_every ops
      // ago at most, when ops are frequent) and the heartbeat's last reading (when not).
      if (e.timed) lane->lastTimedUs = e.scheduledUs + e.startedAfterUs;
      else e.scheduledUs = std::max(lane->lastTimedUs, recentWallMicros());
    });
    return true;
  }
  // The lanes' op counts (ThreadLanes::counts).
  void laneCounts(std::vector<ThreadLanes::CountNow>& out, uint64_t* uncounted) const { lanes_.counts(out, uncounted); }
  // The names a lane entry of this group and backend points at (ThreadLanes::intern).
  const RecordNames* intern(const std::string& group, const std::string& backend, int rank, int worldSize) {
    return lanes_.intern(group, backend, rank, worldSize);
  }
  // Updates the record with this id, if the ring still holds it; `deviceMs` < 0: unknown.
  void finish(uint64_t id, OpState state, int64_t endedUs, const std::string& error, double deviceMs = -1);
  // The last `capacity()` records of the ring and lanes, oldest first.
  std::vector<OpRecord> snapshot() const;
  // For readers that follow the ring (the status publisher's op statistics): appends to
  // `out` the records with ids from `from` on that the ring still holds, at most `max` (the
  // lock is held for one copy of that many), oldest first. Returns the id to start from
  // next time; `*missed` grows by the ids overwritten before they were read.
  uint64_t collect(uint64_t from, size_t max, std::vector<OpRecord>& out, uint64_t* missed) const;
  // The same for the lanes (ThreadLanes::collect): `next` per lane, at most the newest
  // `newest` records of each (`informative`: only those that say more than the counts).
  void collectLanes(std::vector<uint64_t>& next, size_t newest, std::vector<OpRecord>& out, uint64_t* skipped,
                    bool informative = false) const {
    lanes_.collect(next, newest, out, skipped, informative);
  }
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
  // OpRecord::order's counter. Advanced by a load and a store, not a locked
  // read-modify-write: two threads at once may take one value, or one may set it back a
  // little; each thread's own orders still increase (it starts after its last).
  std::atomic<uint64_t> order_{1};
  uint64_t nextOrder() {
    uint64_t& last = ThreadLanes::lastOrder();
    const uint64_t order = std::max(order_.load(std::memory_order_relaxed), last + 1);
    order_.store(order + 1, std::memory_order_relaxed);
    return last = order;
  }
  size_t nextSlot_ GUARDED_BY(ringLock_);  // nextId_ % capacity_ (when capacity_ > 0)
  ThreadLanes lanes_;
  std::deque<SwapRecord> swaps_ GUARDED_BY(mutex_);              // at most kSwapEntries
  std::deque<ShadowEvent> shadows_ GUARDED_BY(mutex_);           // at most kShadowEntries
  std::deque<MembershipRecord> memberships_ GUARDED_BY(mutex_);  // at most kSwapEntries
};

// The record as the dump schema holds it (names for the enums, the arrays as strings).
DumpOp toDumpOp(const OpRecord& r);

}  // namespace commhost::supervisor
