// SPDX-License-Identifier: Apache-2.0
// A mutex, its scoped lock and a condition variable that Clang's thread-safety analysis
// understands (thread_annotations.h); the model is LevelDB's port::Mutex and MutexLock.
//
//   Mutex mu_;
//   int count_ GUARDED_BY(mu_);
//   void bump() EXCLUDES(mu_) { MutexLock lock(&mu_); ++count_; }
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "commhost/thread_annotations.h"

namespace commhost {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  bool tryLock() TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // Tells the analysis that the caller holds the mutex (no run-time check).
  void assertHeld() ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` for its scope.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->lock(); }
  ~MutexLock() RELEASE() { mu_->unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// Waits release `mu` (which the caller holds) and take it again before they return, as
// std::condition_variable does; wake-ups may be spurious, so callers wait in a loop. The
// mutex is passed to each wait (as absl::CondVar does) so the analysis checks it is held.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  void wait(Mutex* mu) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // False when `deadline` passed (the mutex is held again either way).
  template <class Clock, class Duration>
  bool waitUntil(Mutex* mu, const std::chrono::time_point<Clock, Duration>& deadline) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool notified = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return notified;
  }
  template <class Rep, class Period>
  bool waitFor(Mutex* mu, const std::chrono::duration<Rep, Period>& timeout) REQUIRES(mu) {
    return waitUntil(mu, std::chrono::steady_clock::now() + timeout);
  }
  void signal() { cv_.notify_one(); }
  void signalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace commhost
