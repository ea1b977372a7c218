// Waiting on a flag another rank sets in shared memory: spin briefly (the low-latency
// path), then yield, then sleep with backoff. The slow rounds call a check that throws
// on the op's deadline, on abort, or when the awaited peer's process is gone, so a dead
// or missing peer is an error, never an endless spin.
#pragma once

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <string>

namespace commhost::shm {

using Clock = std::chrono::steady_clock;

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// Set once by Backend::abort() from any thread; read by the thread running an op.
class AbortFlag {
 public:
  void set(const std::string& reason) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (reason_.empty()) reason_ = reason.empty() ? "no reason given" : reason;
    }
    set_.store(true, std::memory_order_release);
  }
  bool isSet() const { return set_.load(std::memory_order_acquire); }
  std::string reason() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return reason_;
  }

 private:
  std::atomic<bool> set_{false};
  mutable std::mutex mutex_;  // guards reason_
  std::string reason_;
};

// Returns once ready() is true. Spins for `spin`, then yields for about 200 us, then
// sleeps 10 us .. 1 ms. check() runs on every slow round and throws to give up.
template <class Ready, class Check>
void waitUntil(Ready&& ready, std::chrono::microseconds spin, Check&& check) {
  if (ready()) return;
  const auto start = Clock::now();
  do {
    for (int i = 0; i < 64; ++i) {
      if (ready()) return;
      cpuRelax();
    }
  } while (Clock::now() - start < spin);
  long sleepNs = 10'000;
  for (int round = 0;; ++round) {
    if (ready()) return;
    check();
    if (round < 100) {
      sched_yield();
    } else {
      timespec ts{0, sleepNs};
      nanosleep(&ts, nullptr);
      sleepNs = std::min(sleepNs * 2, 1'000'000L);
    }
  }
}

}  // namespace commhost::shm
