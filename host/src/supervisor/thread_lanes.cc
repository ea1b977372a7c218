// SPDX-License-Identifier: Apache-2.0
#include "thread_lanes.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

// A reader copies a slot its writer may be writing and keeps the copy only when the
// slot's version says it was not (the seqlock's check). ThreadSanitizer would report the
// copy as a race: the copy's reads are hidden from it.
#if defined(__SANITIZE_THREAD__)
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);
#define COMMHOST_IGNORE_READS_BEGIN() AnnotateIgnoreReadsBegin(__FILE__, __LINE__)
#define COMMHOST_IGNORE_READS_END() AnnotateIgnoreReadsEnd(__FILE__, __LINE__)
#else
#define COMMHOST_IGNORE_READS_BEGIN()
#define COMMHOST_IGNORE_READS_END()
#endif

namespace commhost::supervisor {
namespace {

std::atomic<uint64_t> nextSerial{1};

uint64_t kernelThreadId() { return static_cast<uint64_t>(::syscall(SYS_gettid)); }

// Set once this thread's Claims are destroyed (it is exiting): a record made later, by
// another thread_local's destructor, goes to the shared ring.
thread_local bool exiting = false;

}  // namespace

// The lanes this thread holds (one per ThreadLanes it recorded into), given back when it
// exits. Only take() touches it: the per-op path reads ThreadLanes::tls_ alone.
// Weak: a recorder destroyed before the thread (the supervisor is made anew when a
// process's groups all went and another is created) frees its lanes at once.
struct ThreadLanes::Claims {
  std::vector<std::weak_ptr<Lane>> lanes;
  ~Claims() {
    tls_.serial = 0;
    tls_.lane = nullptr;
    exiting = true;
    for (auto& claim : lanes)
      if (auto lane = claim.lock()) lane->owner.store(0, std::memory_order_release);
  }
};

ThreadLanes::ThreadLanes(size_t capacity)
    : capacity_(capacity), serial_(nextSerial.fetch_add(1, std::memory_order_relaxed)) {}

ThreadLanes::Lane* ThreadLanes::take() {
  if (capacity_ == 0 || exiting) return nullptr;
  thread_local Claims claims;
  const uint64_t me = kernelThreadId();
  std::shared_ptr<Lane> lane;
  {
    MutexLock lock(&mutex_);
    // This thread's lane from before (it recorded into another recorder meanwhile), else
    // a free one (its thread exited), else a new one.
    for (const auto& l : lanes_)
      if (l->owner.load(std::memory_order_acquire) == me) lane = l;
    for (size_t i = 0; !lane && i < lanes_.size(); ++i) {
      uint64_t free = 0;
      if (lanes_[i]->owner.compare_exchange_strong(free, me, std::memory_order_acq_rel)) lane = lanes_[i];
    }
    if (!lane && lanes_.size() < kMaxLanes) {
      lane = std::make_shared<Lane>(capacity_);
      lane->owner.store(me, std::memory_order_relaxed);
      lanes_.push_back(lane);
    }
  }
  if (!lane) {
    tls_.serial = serial_;  // the shared ring, for this thread's life: never the lock per op
    tls_.lane = nullptr;
    return nullptr;
  }
  // The claims of recorders gone meanwhile go; this one's is added once.
  auto& held = claims.lanes;
  held.erase(std::remove_if(held.begin(), held.end(), [](const std::weak_ptr<Lane>& c) { return c.expired(); }),
             held.end());
  if (std::none_of(held.begin(), held.end(), [&](const std::weak_ptr<Lane>& c) { return c.lock() == lane; }))
    held.push_back(lane);
  tls_.serial = serial_;
  tls_.lane = lane.get();
  return lane.get();
}

std::vector<std::shared_ptr<ThreadLanes::Lane>> ThreadLanes::lanesNow() const {
  MutexLock lock(&mutex_);
  return lanes_;
}

const RecordNames* ThreadLanes::intern(const std::string& group, const std::string& backend, int rank, int worldSize) {
  MutexLock lock(&mutex_);
  for (const RecordNames& n : names_)
    if (n.rank == rank && n.worldSize == worldSize && n.isFor(backend) && n.groupFull == group) return &n;
  if (names_.size() >= kMaxNames) return nullptr;
  RecordNames& n = names_.emplace_back();
  copyName(n.group, sizeof n.group, group);
  copyName(n.backend, sizeof n.backend, backend);
  n.rank = rank;
  n.worldSize = worldSize;
  n.groupFull = group;
  n.backendFull = backend;
  return &n;
}

ThreadLanes::Count* ThreadLanes::findCount(Lane& lane, const LaneEntry& e, uint8_t sizeClass) {
  const size_t used = lane.countsUsed.load(std::memory_order_relaxed);  // the writer's own value
  for (size_t i = 0; i < used; ++i) {
    Count& c = lane.counts[i];
    if (c.holds(e.names, e.op, sizeClass)) {
      lane.lastCount = i;
      return &c;
    }
  }
  if (used < kCounts) {
    Count& c = lane.counts[used];
    c.setKey(e.names, e.op, sizeClass);
    lane.countsUsed.store(used + 1, std::memory_order_release);  // the key before the cell is read
    lane.lastCount = used;
    return &c;
  }
  // All keyed: a cell the reader has taken all of gets this key. Looked for from where the
  // last reuse stopped, so that one recently keyed cell is not the only one reused.
  for (size_t k = 0; k < kCounts; ++k) {
    const size_t i = (lane.reuseFrom + k) % kCounts;
    Count& c = lane.counts[i];
    if (c.taken.load(std::memory_order_acquire) != c.ops.load(std::memory_order_relaxed)) continue;
    const uint32_t epoch = c.epoch.load(std::memory_order_relaxed);
    c.epoch.store(epoch + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);  // odd before the key changes
    c.setKey(e.names, e.op, sizeClass);
    c.epoch.store(epoch + 2, std::memory_order_release);
    lane.lastCount = i;
    lane.reuseFrom = (i + 1) % kCounts;
    return &c;
  }
  return nullptr;
}

void ThreadLanes::counts(std::vector<CountNow>& out, uint64_t* uncounted) const {
  *uncounted = 0;
  const auto lanes = lanesNow();
  for (size_t l = 0; l < lanes.size(); ++l) {
    const Lane& lane = *lanes[l];
    const size_t used = lane.countsUsed.load(std::memory_order_acquire);
    for (size_t i = 0; i < used; ++i) {
      const Count& c = lane.counts[i];
      const uint32_t epoch = c.epoch.load(std::memory_order_acquire);
      if (epoch & 1) continue;  // its key is changing
      CountNow n{l, i, c.names.load(std::memory_order_relaxed), c.op.load(std::memory_order_relaxed), 0, 0, 0};
      n.sizeClass = c.sizeClass.load(std::memory_order_relaxed);
      n.ops = c.ops.load(std::memory_order_acquire);  // then bytes: at least the bytes of these ops
      n.bytes = c.bytes.load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      if (c.epoch.load(std::memory_order_relaxed) != epoch) continue;  // rekeyed meanwhile
      // Taken: the cell may be reused once its ops stop at this count. An op counted after
      // the load above makes ops differ, so a reuse waits for the next call.
      c.taken.store(n.ops, std::memory_order_release);
      out.push_back(n);
    }
    *uncounted += lane.uncounted.load(std::memory_order_relaxed);
  }
}

OpRecord toOpRecord(const LaneEntry& e) {
  OpRecord r;
  r.order = e.order;
  std::memcpy(r.group, e.names->group, sizeof r.group);
  std::memcpy(r.backend, e.names->backend, sizeof r.backend);
  r.rank = e.names->rank;
  r.worldSize = e.names->worldSize;
  r.op = e.op;
  r.seq = e.seq;
  r.generation = e.generation;
  r.dtype = e.dtype;
  r.bytes = e.bytes;
  r.numel = e.bytes / static_cast<int64_t>(elementBytes(e.dtype));
  r.state = OpState::Completed;
  r.timed = e.timed;
  r.counted = e.counted;
  r.scheduledUs = e.scheduledUs;
  r.startedUs = r.endedUs = e.scheduledUs + e.startedAfterUs;
  return r;
}

bool ThreadLanes::read(const Slot& s, uint64_t number, LaneEntry& out) const {
  const uint64_t want = 2 * ((number - 1) / capacity_ + 1);
  for (int attempt = 0; attempt < 4; ++attempt) {
    const uint64_t before = s.version.load(std::memory_order_acquire);
    if (before & 1) continue;          // being written: look again (a write takes a few ns)
    if (before != want) return false;  // not written yet, or overwritten by a newer record
    COMMHOST_IGNORE_READS_BEGIN();
    std::memcpy(static_cast<void*>(&out), &s.entry, sizeof out);
    COMMHOST_IGNORE_READS_END();
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.version.load(std::memory_order_relaxed) == before) return true;
  }
  return false;  // rewritten each time it was read: it holds a newer record by now
}

void ThreadLanes::readAll(std::vector<Held>& out) const {
  const auto lanes = lanesNow();
  LaneEntry e;
  for (size_t l = 0; l < lanes.size(); ++l) {
    const Lane& lane = *lanes[l];
    const uint64_t written = lane.written.load(std::memory_order_acquire);
    const uint64_t first = written > capacity_ ? written - capacity_ + 1 : 1;
    for (uint64_t n = first; n <= written; ++n)
      if (read(lane.slots[(n - 1) % capacity_], n, e)) out.push_back({l, n, toOpRecord(e)});
  }
}

void ThreadLanes::collect(std::vector<uint64_t>& next, size_t newest, std::vector<OpRecord>& out, uint64_t* skipped,
                          bool informative) const {
  const auto lanes = lanesNow();
  if (next.size() < lanes.size()) next.resize(lanes.size(), 1);
  LaneEntry e;
  for (size_t l = 0; l < lanes.size(); ++l) {
    const Lane& lane = *lanes[l];
    const uint64_t written = lane.written.load(std::memory_order_acquire);
    // The newest `newest` of the lane's records, and never one it no longer holds.
    uint64_t from = written > newest ? written - newest + 1 : 1;
    if (written > capacity_) from = std::max(from, written - capacity_ + 1);
    uint64_t& n = next[l];
    if (n < from) {
      *skipped += from - n;
      n = from;
    }
    for (; n <= written; ++n) {
      if (!read(lane.slots[(n - 1) % capacity_], n, e)) ++*skipped;  // overwritten while this loop read the lane
      else if (!informative || e.timed || !e.counted) out.push_back(toOpRecord(e));
    }
  }
}

}  // namespace commhost::supervisor
