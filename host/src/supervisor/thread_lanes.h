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
// Memory: capacity x ~430 bytes per lane, allocated when the lane is made (a process
// that issues from one thread has one lane), freed with its recorder.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "commhost/mutex.h"
#include "op_record.h"

namespace commhost::supervisor {

class ThreadLanes {
 public:
  static constexpr size_t kMaxLanes = 16;

  struct Slot {
    std::atomic<uint64_t> version{0};  // odd while its writer writes the slot
    std::atomic<uint64_t> number{0};   // which of the lane's records it holds (from 1); 0: none yet
    OpRecord record;
  };
  struct Lane {
    explicit Lane(size_t capacity) : slots(new Slot[capacity]) {}
    std::unique_ptr<Slot[]> slots;
    std::atomic<uint64_t> written{0};  // records written to it, ever
    std::atomic<uint64_t> owner{0};    // the kernel id of the thread that writes it; 0: free
    size_t next = 0;                   // the writer's: the slot of record written + 1
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

  // Writes the next record of `lane` (the caller's own, from mine()): `fill(OpRecord&)`
  // fills the slot in place and must set every field but error (cleared first), id (0)
  // and order.
  template <class Fill> void write(Lane& lane, uint64_t order, Fill&& fill) {
    const uint64_t number = lane.written.load(std::memory_order_relaxed) + 1;
    Slot& s = lane.slots[lane.next];
    if (++lane.next == capacity_) lane.next = 0;
    const uint64_t v = s.version.load(std::memory_order_relaxed);
    s.version.store(v + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);  // odd before any byte changes
    s.record.error[0] = '\0';
    fill(s.record);
    s.record.id = 0;
    s.record.order = order;
    s.number.store(number, std::memory_order_relaxed);
    s.version.store(v + 2, std::memory_order_release);
    lane.written.store(number, std::memory_order_release);
  }

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
  // Appends at most `max` records in all, oldest first per lane; `*missed` grows by the
  // records overwritten before they were read. Returns whether any lane has more.
  bool collect(std::vector<uint64_t>& next, size_t max, std::vector<OpRecord>& out, uint64_t* missed) const;

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
  // Copies slot `s` if it holds record `number` and is not being written.
  static bool read(const Slot& s, uint64_t number, OpRecord& out);

  const size_t capacity_;
  const uint64_t serial_;  // this object's, process-wide (a cache names its lanes by it)
  mutable Mutex mutex_;
  std::vector<std::shared_ptr<Lane>> lanes_ GUARDED_BY(mutex_);  // only grows
};

}  // namespace commhost::supervisor
