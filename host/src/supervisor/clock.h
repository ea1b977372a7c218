// SPDX-License-Identifier: Apache-2.0
// Time for the supervisor's loops, injectable: FastClock (steady_clock's time, read from
// the CPU's counter where it can be) in production, a ManualClock in tests, so that a
// test moves heartbeats and deadlines forward itself instead of sleeping on real ones.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>

#include "commhost/export.h"
#include "commhost/fast_clock.h"
#include "commhost/mutex.h"

namespace commhost::supervisor {

using SteadyClock = std::chrono::steady_clock;
using TimePoint = SteadyClock::time_point;
using Millis = std::chrono::milliseconds;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimePoint now() = 0;
  // A loop (any unique address) that waits on this clock: enrol before its thread
  // starts, leave when the thread ends (a ManualClock waits for enrolled loops).
  virtual void enrol(const void* /*loop*/) {}
  virtual void leave(const void* /*loop*/) {}
  // Waits on `cv` (`mu` held, released meanwhile) until `deadline` of this clock or a
  // signal; may return early, so callers loop on their condition and now().
  virtual void waitUntil(const void* loop, Mutex& mu, CondVar& cv, TimePoint deadline) REQUIRES(mu) = 0;

  static std::shared_ptr<Clock> real();
};

// Stands still until advance(). Loops waiting on it wake when their deadline is reached.
class COMMHOST_API ManualClock final : public Clock {
 public:
  ManualClock();
  TimePoint now() override EXCLUDES(mu_);
  void enrol(const void* loop) override EXCLUDES(mu_);
  void leave(const void* loop) override EXCLUDES(mu_);
  void waitUntil(const void* loop, Mutex& mu, CondVar& cv, TimePoint deadline) override REQUIRES(mu) EXCLUDES(mu_);
  // Moves time forward by `by`, in steps of at most `step`; after each step, returns
  // once every enrolled loop whose deadline passed has run its round and waits again
  // (bounded: 10 s of real time per step).
  void advance(Millis by, Millis step = Millis(10)) EXCLUDES(mu_);

 private:
  bool settled() REQUIRES(mu_);
  Mutex mu_;
  CondVar changed_;
  TimePoint now_ GUARDED_BY(mu_);
  // Enrolled loops and the deadline each waits for; TimePoint::min() while one runs its
  // round (it has not waited since its deadline passed).
  std::map<const void*, TimePoint> loops_ GUARDED_BY(mu_);
};

// Used by the next supervisor started in this process (tests); null: the real clock.
COMMHOST_API void useClockForTesting(std::shared_ptr<Clock> clock);
std::shared_ptr<Clock> clockForNewSupervisor();

// The wait between a loop's rounds, cut short by stop().
class Ticker {
 public:
  explicit Ticker(std::shared_ptr<Clock> clock) : clock_(std::move(clock)) { clock_->enrol(this); }
  ~Ticker() { clock_->leave(this); }
  // Waits `period` of clock time; false once stop() was called.
  bool wait(Millis period) EXCLUDES(mu_);
  void stop() EXCLUDES(mu_);
  Clock& clock() { return *clock_; }

 private:
  std::shared_ptr<Clock> clock_;
  Mutex mu_;
  CondVar cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
};

}  // namespace commhost::supervisor
