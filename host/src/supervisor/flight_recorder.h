// SPDX-License-Identifier: Apache-2.0
// FlightRecorder: a bounded ring of the last collectives of every group in this process.
//
// Threading: every method may be called from any thread; one mutex guards the ring
// (held for a copy of one fixed-size record, no allocation while it is held).
// Memory: entries x sizeof(OpRecord), fixed at construction.
#pragma once

#include <chrono>

#include <cstdint>
#include <deque>
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

// One hot swap (ProcessGroup::reconfigure) on this rank: its outcome and phase times.
// Swaps are rare, so these keep strings; the ring holds the last kSwapEntries.
struct SwapRecord {
  std::string group;
  int rank = 0;
  uint64_t fromGeneration = 0;
  uint64_t toGeneration = 0;  // == fromGeneration when it did not commit
  std::string outcome;        // "committed", "rolled_back"
  int64_t startedUs = 0;      // wall clock
  int64_t checkUs = 0, drainUs = 0, buildUs = 0, commitUs = 0, totalUs = 0;
  std::vector<std::string> kept, built, removed;
  std::string error;  // why it rolled back
};
constexpr size_t kSwapEntries = 256;

// One membership change (ProcessGroup::shrink) on this rank: who left, the phase times.
// Rare, so it keeps strings, as a swap's record does; the ring holds the last kSwapEntries.
struct MembershipRecord {
  std::string group;
  int rankBefore = 0;  // this rank's rank in the group before
  int rankAfter = -1;  // and after (-1: it did not become a member)
  int worldBefore = 0, worldAfter = 0;
  uint64_t fromGeneration = 0, toGeneration = 0;
  std::vector<int> removed;  // global ranks no longer members
  std::string outcome;       // "shrunk", "failed", "removed" (this rank left out), "refused" (below min_ranks)
  std::string error;         // why it did not shrink
  int64_t startedUs = 0;     // wall clock
  int64_t agreeUs = 0, buildUs = 0, confirmUs = 0, commitUs = 0, totalUs = 0;
};

// One sampled call compared with its route's shadow backend (shadow mode). The ring holds
// the last kShadowEntries; `commhost trace analyze` sums them per op and size.
struct ShadowEvent {
  std::string group;
  int rank = 0;
  uint64_t seq = 0;
  std::string op;
  int64_t bytes = 0;
  std::string backend, shadow;
  std::string outcome;  // "agree", "disagree", "failed"
  double backendUs = 0, shadowUs = 0;
  std::string detail;  // where they differ, or why one failed
};
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
    if (ring_.empty()) return 0;
    std::lock_guard<std::mutex> lock(mutex_);
    const uint64_t id = nextId_++;
    OpRecord& slot = ring_[id % ring_.size()];
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
  size_t capacity() const { return ring_.size(); }

 private:
  mutable std::mutex mutex_;
  std::vector<OpRecord> ring_;
  uint64_t nextId_ = 1;
  std::deque<SwapRecord> swaps_;              // guarded by mutex_, at most kSwapEntries
  std::deque<ShadowEvent> shadows_;           // guarded by mutex_, at most kShadowEntries
  std::deque<MembershipRecord> memberships_;  // guarded by mutex_, at most kSwapEntries
};

nlohmann::json recordToJson(const OpRecord& r);
nlohmann::json swapToJson(const SwapRecord& s);
nlohmann::json shadowToJson(const ShadowEvent& e);
nlohmann::json membershipToJson(const MembershipRecord& m);

}  // namespace commhost::supervisor
