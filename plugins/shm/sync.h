// SPDX-License-Identifier: Apache-2.0
// Waiting on a counter another rank advances in shared memory: spin briefly (the
// low-latency path), yield for a while, then sleep on a futex on the counter's low 32
// bits, so the writer's next store wakes the sleeper at once (a plain sleep with backoff
// lets two ranks fall into a convoy of each other's sleeps). Before each sleep a check
// runs that throws on the op's deadline, on abort, or when the awaited peer's process is
// gone, and sleeps are bounded, so a dead or missing peer is an error, never a hang.
//
// The wake-up handshake: a sleeper increments `sleepers` (a locked instruction, a full
// fence), re-reads the counter, then FUTEX_WAITs (the kernel re-checks the word). The
// writer stores the counter with release and reads `sleepers` without a fence: a
// seq_cst store would stall every post for a cross-core round trip (0.15-0.6 us here),
// the whole budget of a small op. The price: in the rare race where the writer reads
// `sleepers` before its own store is visible while a peer is entering its sleep, that
// peer oversleeps until its bounded sleep (1 ms) ends. A peer only sleeps after it has
// already waited spin_us + yield_us, so this never touches the fast path or a hang.
#pragma once

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <string>

#include "commhost/fast_clock.h"
#include "commhost/mutex.h"

namespace commhost::shm {

// Read between polls of a spin and at every wait: FastClock costs half of steady_clock.
using Clock = FastClock;

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the futex word is the counter's low half");

// Shared (not FUTEX_PRIVATE): the counters live in a mapping shared between processes.
inline void futexWait(const std::atomic<uint64_t>& counter, uint32_t expected, long timeoutNs) {
  timespec ts{timeoutNs / 1'000'000'000L, timeoutNs % 1'000'000'000L};
  ::syscall(SYS_futex, reinterpret_cast<const uint32_t*>(&counter), FUTEX_WAIT, expected, &ts, nullptr, 0);
}
inline void futexWakeAll(const std::atomic<uint64_t>& counter) {
  ::syscall(SYS_futex, reinterpret_cast<const uint32_t*>(&counter), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// The writer's side: publish `value`, then wake sleepers if any registered.
inline void publish(std::atomic<uint64_t>& counter, uint64_t value, const std::atomic<uint32_t>& sleepers) {
  counter.store(value, std::memory_order_release);
  if (sleepers.load(std::memory_order_relaxed) != 0) futexWakeAll(counter);
}

// Set once by Backend::abort() from any thread; read by the thread running an op.
class AbortFlag {
 public:
  void set(const std::string& reason) {
    {
      MutexLock lock(&mutex_);
      if (reason_.empty()) reason_ = reason.empty() ? "no reason given" : reason;
    }
    set_.store(true, std::memory_order_release);
  }
  bool isSet() const { return set_.load(std::memory_order_acquire); }
  std::string reason() const {
    MutexLock lock(&mutex_);
    return reason_;
  }

 private:
  std::atomic<bool> set_{false};
  mutable Mutex mutex_;
  std::string reason_ GUARDED_BY(mutex_);
};

// Polls `done` for `spin`, a pause between polls; true as soon as it returns true. The
// clock is read every 8 pauses: a pause takes 25-140 ns (AMD / Intel), so a batch of 64
// would overshoot a 1 us spin several times over, time the rank sharing this CPU (ranks
// outnumbering CPUs) then waits for. The first batch runs before any clock read (most
// waits of a rank with a CPU of its own end there), also for spin 0.
template <class Done> bool spinFor(std::chrono::microseconds spin, Done&& done) {
  const auto batch = [&] {
    for (int i = 0; i < 8; ++i) {
      if (done()) return true;
      cpuRelax();
    }
    return false;
  };
  if (batch()) return true;
  for (const auto until = Clock::now() + spin; Clock::now() < until;)
    if (batch()) return true;
  return false;
}

// Returns the counter's value once it is >= target. Spins for `spin`, yields for
// `yield`, then sleeps on the counter's futex (at most 1 ms per sleep). check() runs
// during the yields and before every sleep, and throws to give up.
template <class Check>
uint64_t waitAtLeast(const std::atomic<uint64_t>& counter, uint64_t target, std::atomic<uint32_t>& sleepers,
                     std::chrono::microseconds spin, std::chrono::microseconds yield, Check&& check) {
  uint64_t value = 0;
  if (spinFor(spin, [&] { return (value = counter.load(std::memory_order_acquire)) >= target; })) return value;
  // Yielding keeps this CPU busy, so a peer preempted here runs at once, and a wake-up
  // does not pay for an idle (virtual) CPU to come back, which costs 50-100 us in a VM.
  const auto yieldUntil = Clock::now() + yield;
  do {
    for (int i = 0; i < 16; ++i) {
      if ((value = counter.load(std::memory_order_acquire)) >= target) return value;
      sched_yield();
    }
    check();
  } while (Clock::now() < yieldUntil);
  while (true) {
    check();
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    value = counter.load(std::memory_order_seq_cst);
    if (value < target) futexWait(counter, static_cast<uint32_t>(value), 1'000'000L);
    sleepers.fetch_sub(1, std::memory_order_seq_cst);
    if ((value = counter.load(std::memory_order_acquire)) >= target) return value;
  }
}

}  // namespace commhost::shm
