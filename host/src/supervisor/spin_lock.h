// SPDX-License-Identifier: Apache-2.0
// SpinLock: a lock for sections of a few tens of nanoseconds on every op's path (the
// flight recorder's slot), where std::mutex's lock and unlock are two calls into the C
// library and two locked instructions. Taking a free SpinLock is one exchange and
// releasing it one plain store. A thread that finds it held spins on a read for a while,
// then yields its CPU, so a holder that was preempted (ranks outnumbering CPUs) gets to
// run. Not for long sections or for waiting on a condition: use Mutex (commhost/mutex.h).
// Clang's thread-safety analysis treats it as a mutex.
#pragma once

#include <atomic>
#include <thread>

#include "commhost/thread_annotations.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace commhost::supervisor {

class CAPABILITY("mutex") SpinLock {
 public:
  SpinLock() = default;
  SpinLock(const SpinLock&) = delete;
  SpinLock& operator=(const SpinLock&) = delete;

  void lock() ACQUIRE() {
    if (!held_.exchange(true, std::memory_order_acquire)) return;  // the common case: free
    lockContended();
  }
  void unlock() RELEASE() { held_.store(false, std::memory_order_release); }

 private:
  void lockContended() {
    for (int spins = 0;; ++spins) {
      // Read until it looks free (a read keeps the line shared), then try to take it.
      if (!held_.load(std::memory_order_relaxed) && !held_.exchange(true, std::memory_order_acquire)) return;
      if (spins < 128) {
        pause();
      } else {
        std::this_thread::yield();
      }
    }
  }
  static void pause() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#endif
  }
  std::atomic<bool> held_{false};
};

// Holds `lock` for its scope.
class SCOPED_CAPABILITY SpinLockHold {
 public:
  explicit SpinLockHold(SpinLock* lock) ACQUIRE(lock) : lock_(lock) { lock_->lock(); }
  ~SpinLockHold() RELEASE() { lock_->unlock(); }
  SpinLockHold(const SpinLockHold&) = delete;
  SpinLockHold& operator=(const SpinLockHold&) = delete;

 private:
  SpinLock* const lock_;
};

}  // namespace commhost::supervisor
