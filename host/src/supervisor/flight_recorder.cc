// SPDX-License-Identifier: Apache-2.0
#include "flight_recorder.h"

#include <algorithm>
#include <atomic>

#include <chrono>
#include <cstring>
#include <ctime>
#include <tuple>

namespace commhost::supervisor {

const char* opStateName(OpState s) {
  switch (s) {
    case OpState::Started: return "started";
    case OpState::Completed: return "completed";
    case OpState::Failed: return "failed";
  }
  return "?";
}

void copyNameCut(char* dst, size_t size, const std::string& src) {
  size_t n = std::min(size - 1, src.size());
  // Cut at a character boundary: never keep the lead bytes of a split UTF-8 character.
  if (n < src.size())
    while (n > 0 && (static_cast<unsigned char>(src[n]) & 0xC0) == 0x80) --n;
  std::memcpy(dst, src.data(), n);
  dst[n] = '\0';
}

int64_t wallMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t coarseWallMicros() {
  timespec t{};
  ::clock_gettime(CLOCK_REALTIME_COARSE, &t);
  return static_cast<int64_t>(t.tv_sec) * 1000000 + t.tv_nsec / 1000;
}

namespace detail {
std::atomic<int64_t> recentWallUs{wallMicros()};
}  // namespace detail

namespace {
int64_t offsetNow() {
  using namespace std::chrono;
  const int64_t wall = wallMicros();
  detail::recentWallUs.store(wall, std::memory_order_relaxed);
  return wall - duration_cast<microseconds>(steady_clock::now().time_since_epoch()).count();
}
std::atomic<int64_t> wallMinusSteadyUs{offsetNow()};
}  // namespace

void refreshWallClockOffset() { wallMinusSteadyUs.store(offsetNow(), std::memory_order_relaxed); }

int64_t wallMicros(std::chrono::steady_clock::time_point t) {
  using namespace std::chrono;
  return duration_cast<microseconds>(t.time_since_epoch()).count() + wallMinusSteadyUs.load(std::memory_order_relaxed);
}

FlightRecorder::FlightRecorder(size_t entries)
    : capacity_(entries), ring_(entries), nextSlot_(entries > 1 ? 1 : 0), lanes_(entries) {}

uint64_t FlightRecorder::add(const OpRecord& record) {
  return emplace([&](OpRecord& slot) { slot = record; });
}

void FlightRecorder::finish(uint64_t id, OpState state, int64_t endedUs, const std::string& error, double deviceMs) {
  if (id == 0) return;  // not recorded (entries 0)
  SpinLockHold hold(&ringLock_);
  OpRecord& r = ring_[id % ring_.size()];
  if (r.id != id) return;  // overwritten by newer collectives
  r.state = state;
  r.endedUs = endedUs;
  r.deviceMs = deviceMs;
  copyName(r.error, sizeof(r.error), error);
}

std::vector<OpRecord> FlightRecorder::snapshot() const {
  // The lanes' records with the ring's, in the order they were recorded (a lane's own
  // records by their number, the ring's by id, where two share an order).
  std::vector<ThreadLanes::Held> held;
  held.reserve(capacity_);  // before the lock: nothing allocates under it
  {
    SpinLockHold hold(&ringLock_);
    for (size_t i = 0; i < ring_.size(); ++i) {
      const OpRecord& r = ring_[(nextId_ + i) % ring_.size()];
      if (r.id != 0) held.push_back({ThreadLanes::kMaxLanes, r.id, r});
    }
  }
  lanes_.readAll(held);
  std::stable_sort(held.begin(), held.end(), [](const ThreadLanes::Held& a, const ThreadLanes::Held& b) {
    return std::tie(a.record.order, a.lane, a.number) < std::tie(b.record.order, b.lane, b.number);
  });
  const size_t skip = held.size() > capacity_ ? held.size() - capacity_ : 0;
  std::vector<OpRecord> out;
  out.reserve(held.size() - skip);
  for (size_t i = skip; i < held.size(); ++i) out.push_back(held[i].record);
  return out;
}

uint64_t FlightRecorder::collect(uint64_t from, size_t max, std::vector<OpRecord>& out, uint64_t* missed) const {
  if (capacity_ == 0) return from;
  out.reserve(out.size() + std::min(max, capacity_));  // before the lock: nothing allocates under it
  SpinLockHold hold(&ringLock_);
  const uint64_t oldest = nextId_ > ring_.size() ? nextId_ - ring_.size() : 1;
  if (from < oldest) {
    *missed += oldest - from;
    from = oldest;
  }
  const uint64_t end = std::min<uint64_t>(nextId_, from + max);
  for (uint64_t id = from; id < end; ++id) out.push_back(ring_[id % ring_.size()]);
  return end;
}

bool FlightRecorder::find(uint64_t id, OpRecord& out) const {
  if (capacity_ == 0 || id == 0) return false;
  SpinLockHold hold(&ringLock_);
  const OpRecord& r = ring_[id % ring_.size()];
  if (r.id != id) return false;
  out = r;
  return true;
}

void FlightRecorder::addSwap(SwapRecord record) {
  MutexLock lock(&mutex_);
  if (swaps_.size() >= kSwapEntries) swaps_.pop_front();
  swaps_.push_back(std::move(record));
}

std::vector<SwapRecord> FlightRecorder::swaps() const {
  MutexLock lock(&mutex_);
  return {swaps_.begin(), swaps_.end()};
}

void FlightRecorder::addMembership(MembershipRecord record) {
  MutexLock lock(&mutex_);
  if (memberships_.size() >= kSwapEntries) memberships_.pop_front();
  memberships_.push_back(std::move(record));
}

std::vector<MembershipRecord> FlightRecorder::memberships() const {
  MutexLock lock(&mutex_);
  return {memberships_.begin(), memberships_.end()};
}

void FlightRecorder::addShadow(ShadowEvent event) {
  MutexLock lock(&mutex_);
  if (shadows_.size() >= kShadowEntries) shadows_.pop_front();
  shadows_.push_back(std::move(event));
}

std::vector<ShadowEvent> FlightRecorder::shadows() const {
  MutexLock lock(&mutex_);
  return {shadows_.begin(), shadows_.end()};
}

DumpOp toDumpOp(const OpRecord& r) {
  DumpOp o;
  o.id = r.order;
  o.group = r.group;
  o.rank = r.rank;
  o.worldSize = r.worldSize;
  o.seq = r.seq;
  o.generation = r.generation;
  o.op = opName(r.op);
  o.backend = r.backend;
  o.dtype = dtypeName(r.dtype);
  o.bytes = r.bytes;
  o.numel = r.numel;
  o.state = opStateName(r.state);
  o.scheduledUs = r.scheduledUs;
  o.startedUs = r.startedUs;
  o.endedUs = r.endedUs;
  o.timed = r.timed;
  o.deviceMs = r.deviceMs >= 0 ? r.deviceMs : -1;
  o.error = r.error;
  return o;
}

}  // namespace commhost::supervisor
