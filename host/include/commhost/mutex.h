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

// Waits release the mutex and take it again before they return, as with
// std::condition_variable; wake-ups may be spurious, so callers wait in a loop.
class CondVar {
 public:
  explicit CondVar(Mutex* mu) : mu_(mu) {}
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  Mutex* mutex() const { return mu_; }
  void wait() REQUIRES(mu_) {
    std::unique_lock<std::mutex> lock(mu_->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // False when `deadline` passed (the mutex is held again either way).
  template <class Clock, class Duration>
  bool waitUntil(const std::chrono::time_point<Clock, Duration>& deadline) REQUIRES(mu_) {
    std::unique_lock<std::mutex> lock(mu_->mu_, std::adopt_lock);
    const bool notified = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return notified;
  }
  template <class Rep, class Period>
  bool waitFor(const std::chrono::duration<Rep, Period>& timeout) REQUIRES(mu_) {
    return waitUntil(std::chrono::steady_clock::now() + timeout);
  }
  void signal() { cv_.notify_one(); }
  void signalAll() { cv_.notify_all(); }

 private:
  Mutex* const mu_;
  std::condition_variable cv_;
};

}  // namespace commhost
