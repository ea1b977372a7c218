// SPDX-License-Identifier: Apache-2.0
// ThreadLanes: the flight recorder's records of ops that completed inside their call (a
// backend ran them inline: self, shm's small ops), one ring ("lane") per issuing thread.
//
// Why: these are the ops of a few hundred nanoseconds, and the shared ring's lock (one
// locked exchange) was 7 ns of the supervisor's ~25 ns per op on them. A lane has one
// writer, so a record is written with plain stores: no lock, no locked instruction.
//
// Threading:
// - A lane's writer is the thread that holds it (Lane::owner). It writes a slot between
//   two stores of the slot's version (odd while writing: a seqlock); readers copy the
//   slot and keep the copy only if the version was even and unchanged around it.
// - A thread takes a lane at its first record (under mutex_), keeps a pointer to it in a
//   thread_local, and gives it back when it exits. The lane, and its records, stay: the
//   next new thread takes it over. A thread that finds no lane (kMaxLanes taken) gets
//   null, for its life, and records into the shared ring, under its lock.
// - Readers (dumps, the op statistics) may run on any thread at any time.
// - A lane's record is one cache line: the names (group, backend, rank, world size) are
//   interned (RecordNames, made off the per-op path and kept until the recorder goes) and
//   the record points at them; readers turn it back into an OpRecord.
// Memory: capacity x 64 bytes per lane, allocated when the lane is made (a process that
// issues from one thread has one lane), freed with its recorder; ~150 bytes per interned
// name set, at most kMaxNames.
#pragma once

#include <atomic>
#include <cassert>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "commhost/mutex.h"
#include "op_record.h"

namespace commhost::supervisor {

// The names of the ops in a lane: one per (group, backend, rank, world size) a recorder
// has seen. Immutable once made; freed with the recorder.
struct RecordNames {
  char group[sizeof(OpRecord::group)] = {};
  char backend[sizeof(OpRecord::backend)] = {};
  int rank = 0;
  int worldSize = 0;
  // The names before they were cut to the arrays: what interning and a cache compare.
  std::string groupFull, backendFull;
  bool isFor(const std::string& backendName) const { return backendFull == backendName; }
};

// An op that completed in its call, as the per-op path writes it into a lane: one cache
// line with the slot's version. The rest of its OpRecord follows (state completed, no
// error, no device time, numel from bytes and dtype, ended when started).
struct LaneEntry {
  uint64_t order = 0;  // OpRecord::order
  uint64_t seq = 0;
  uint64_t generation = 0;
  int64_t bytes = 0;
  // Timed: when the op was issued. Untimed: set by FlightRecorder::emplaceInLane (an
  // earlier time, OpRecord::timed says which).
  int64_t scheduledUs = 0;
  const RecordNames* names = nullptr;
  int32_t startedAfterUs = 0;  // startedUs - scheduledUs (an op inline for 35 minutes is cut)
  OpType op = OpType::Allreduce;
  DType dtype = DType::Float32;
  bool timed = false;
  bool counted = false;  // set by ThreadLanes::write: OpRecord::counted
};
OpRecord toOpRecord(const LaneEntry& e);

class ThreadLanes {
 public:
  static constexpr size_t kMaxLanes = 16;

  static constexpr size_t kMaxNames = 4096;

  // One cache line. The version counts the slot's writes, twice (odd while its writer
  // writes): record number n of a lane is in slot (n - 1) % capacity, and is there while
  // the version is 2 * ((n - 1) / capacity + 1).
  struct alignas(64) Slot {
    std::atomic<uint64_t> version{0};
    LaneEntry entry;
  };
  static_assert(sizeof(Slot) == 64, "a lane's record is one cache line");
  // The ops a lane recorded, counted per (names, op, size class): the op statistics count
  // from these, exactly, however few of the records they read. The counts have one writer
  // (plain load and store: no locked instruction) and are read at any time; they only grow.
  // A cell's key is set by the writer when it takes the cell (before `Lane::countsUsed`
  // publishes it) and again when it reuses one: when all kCounts are keyed and a new key
  // comes, a cell whose ops the reader has all taken (`taken` == `ops`) gets the new key,
  // so a thread that makes many groups or swaps keeps exact counts. The reader attributes
  // what a cell gained since its last read to the key it reads; reuse waits until it has
  // read everything, so no op is added to the wrong key. `epoch` counts the keyings, twice
  // (odd while the key changes): a seqlock, so that a reader never pairs one key's name
  // with another's op.
  static constexpr size_t kCounts = 64;
  struct Count {
    std::atomic<const RecordNames*> names{nullptr};
    std::atomic<OpType> op{OpType::Allreduce};
    std::atomic<uint8_t> sizeClass{0};
    std::atomic<uint32_t> epoch{0};
    std::atomic<uint64_t> ops{0}, bytes{0};  // bytes is stored first: a reader of ops sees its bytes
    // The reader's: the ops it has added up, stored by counts() (one reader: the op
    // statistics). Mutable: reading the counts is what takes them.
    mutable std::atomic<uint64_t> taken{0};
    // The writer's, for its own key: whether this is it, and setting it.
    bool holds(const RecordNames* n, OpType o, uint8_t size) const {
      return names.load(std::memory_order_relaxed) == n && op.load(std::memory_order_relaxed) == o &&
             sizeClass.load(std::memory_order_relaxed) == size;
    }
    void setKey(const RecordNames* n, OpType o, uint8_t size) {
      names.store(n, std::memory_order_relaxed);
      op.store(o, std::memory_order_relaxed);
      sizeClass.store(size, std::memory_order_relaxed);
    }
  };
  struct Lane {
    explicit Lane(size_t capacity) : slots(new Slot[capacity]), counts(new Count[kCounts]) {}
    std::unique_ptr<Slot[]> slots;
    std::atomic<uint64_t> written{0};  // records written to it, ever
    std::atomic<uint64_t> owner{0};    // the kernel id of the thread that writes it; 0: free
    size_t next = 0;                   // the writer's: the slot of record written + 1
    uint64_t lap = 0;                  // the writer's: how often `next` went round (half the slot's version)
    std::unique_ptr<Count[]> counts;
    std::atomic<size_t> countsUsed{0};
    size_t lastCount = 0;                // the writer's: the cell it counted into last
    size_t reuseFrom = 0;                // the writer's: where findCount looks for a cell to reuse
    int64_t lastTimedUs = 0;             // the writer's: when its last timed op started
    std::atomic<uint64_t> uncounted{0};  // ops whose key found no cell (kCounts in use): their records say
  };

  explicit ThreadLanes(size_t capacity);
  ThreadLanes(const ThreadLanes&) = delete;
  ThreadLanes& operator=(const ThreadLanes&) = delete;

  // The calling thread's last order (OpRecord::order), for any recorder.
  static uint64_t& lastOrder() { return tls_.lastOrder; }

  // The calling thread's lane, taken at its first call; null when none is left.
  Lane* mine() {
    if (tls_.serial == serial_) return tls_.lane;
    return take();
  }

  // Writes the next record of `lane` (the caller's own, from mine()): `fill(LaneEntry&)`
  // sets every field of the slot's entry but `counted` (it must set the names), and the
  // op is counted.
  template <class Fill> [[gnu::always_inline]] void write(Lane& lane, Fill&& fill) {
    const uint64_t number = lane.written.load(std::memory_order_relaxed) + 1;
    Slot& s = lane.slots[lane.next];
    // The slot's version, known without reading the slot: its line is cold (written one
    // lap ago), and a load of it held every op up until the line came (3-4 ns in one
    // process); stores do not wait.
    const uint64_t v = 2 * lane.lap;
    if (++lane.next == capacity_) {
      lane.next = 0;
      ++lane.lap;
    }
    s.version.store(v + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);  // odd before any byte changes
    fill(s.entry);
    assert(s.entry.names && "a lane entry without names is recorded into the ring");
    s.entry.counted = count(lane, s.entry);
    s.version.store(v + 2, std::memory_order_release);
    lane.written.store(number, std::memory_order_release);
    // The next record's line, fetched for writing now: by the next op it is in this
    // core's cache, so its stores leave the store buffer at once. A store to a line not
    // there held every later locked instruction (the next refcount drop) until the line
    // came: 10-15 ns per 8 B op (perf: the lock xadd of the work's release).
    __builtin_prefetch(&lane.slots[lane.next], 1, 3);
  }

  // What the op statistics read of the counts: one cell of one lane, as it is now.
  struct CountNow {
    size_t lane, cell;
    const RecordNames* names;
    OpType op;
    uint8_t sizeClass;
    uint64_t ops, bytes;
  };
  // Appends every lane's cells; `*uncounted` is set to the ops no cell took, in all. For
  // one reader over the lanes' whole life (the op statistics, whose heartbeat thread is
  // made with the recorder), which takes every cell it is given: what a cell gained since
  // the reader's last call belongs to the key given now, and once given, the cell may get
  // another key (Count). A cell whose key is changing is left out, until the next call.
  void counts(std::vector<CountNow>& out, uint64_t* uncounted) const;

  // The interned names for this group and backend (any thread; takes mutex_: off the
  // per-op path, behind a cache such as GroupMonitor's); null once kMaxNames are made.
  const RecordNames* intern(const std::string& group, const std::string& backend, int rank, int worldSize)
      EXCLUDES(mutex_);

  // Appends every record the lanes hold to `out`, each lane oldest first, paired with
  // its lane and number (for an order among records of one order).
  struct Held {
    size_t lane;
    uint64_t number;
    OpRecord record;
  };
  void readAll(std::vector<Held>& out) const;

  // For readers that follow the lanes (the op statistics): `next` holds, per lane, the
  // number of the next record to read (grown to the lane count; 1 for a new lane).
  // Appends, per lane, the records from `next` on, but at most the lane's newest `newest`,
  // oldest first; `*skipped` grows by the records passed over: older than those, or
  // overwritten before they were read. Bounded so that a reader's cost does not grow with
  // the op rate: at millions of ops a second, every record copied is a cache line or
  // more taken from the writing core. `informative`: only the records that say more than
  // the lane's counts (timed, or not counted), the rest read but not converted.
  void collect(std::vector<uint64_t>& next, size_t newest, std::vector<OpRecord>& out, uint64_t* skipped,
               bool informative = false) const;

 private:
  // The calling thread's last lane and whose it is: plain data, defined here (inline) with
  // a constant initialiser, so that reading it costs no initialisation check (the thread's
  // claims, which it gives back at its exit, are kept apart, in take()). Initial-exec: one
  // read relative to the thread pointer, from the static TLS space, of which a library
  // loaded by dlopen (the Python module) has a little (these 24 bytes fit; glibc refuses
  // to load a library whose initial-exec TLS does not, "cannot allocate memory in static
  // TLS block").
  struct Tls {
    uint64_t serial;
    Lane* lane;
    uint64_t lastOrder;
  };
  static inline thread_local Tls tls_ __attribute__((tls_model("initial-exec"))){0, nullptr, 0};
  struct Claims;

  Lane* take() EXCLUDES(mutex_);
  std::vector<std::shared_ptr<Lane>> lanesNow() const EXCLUDES(mutex_);
  // The writer's: adds the op of `e` to its cell (the last one used, most often); false
  // when its key found no cell (the op statistics then count it from its record).
  static bool count(Lane& lane, const LaneEntry& e) {
    const uint8_t sizeClass = sizeClassOf(e.bytes);
    Count* c = &lane.counts[lane.lastCount];
    if (!c->holds(e.names, e.op, sizeClass)) c = findCount(lane, e, sizeClass);
    if (!c) {
      lane.uncounted.store(lane.uncounted.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      return false;
    }
    // Both release (plain stores on x86): a reader that sees either sees the key they are
    // for (Count::epoch).
    c->bytes.store(c->bytes.load(std::memory_order_relaxed) + static_cast<uint64_t>(e.bytes),
                   std::memory_order_release);
    c->ops.store(c->ops.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    return true;
  }
  // The cell of this key: found, made if new, or reused (Count); null when all kCounts
  // are keyed and the reader has not taken all of any. Sets lastCount.
  static Count* findCount(Lane& lane, const LaneEntry& e, uint8_t sizeClass);
  // Copies the entry of record `number` (in slot `s`) if the slot still holds it and was
  // not being written.
  bool read(const Slot& s, uint64_t number, LaneEntry& out) const;

  const size_t capacity_;
  const uint64_t serial_;  // this object's, process-wide (a cache names its lanes by it)
  mutable Mutex mutex_;
  std::vector<std::shared_ptr<Lane>> lanes_ GUARDED_BY(mutex_);  // only grows
  std::deque<RecordNames> names_ GUARDED_BY(mutex_);             // only grows: entries point into it
};

}  // namespace commhost::supervisor
