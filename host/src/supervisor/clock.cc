// SPDX-License-Identifier: Apache-2.0
#include "clock.h"

#include <thread>

namespace commhost::supervisor {
namespace {

class RealClock final : public Clock {
 public:
  TimePoint now() override { return FastClock::now(); }
  void waitUntil(const void*, Mutex& mu, CondVar& cv, TimePoint deadline) override REQUIRES(mu) {
    cv.waitUntil(&mu, deadline);
  }
};

Mutex testClockMutex;
std::shared_ptr<Clock> testClock GUARDED_BY(testClockMutex);

}  // namespace

std::shared_ptr<Clock> Clock::real() {
  static const auto clock = std::make_shared<RealClock>();
  return clock;
}

void useClockForTesting(std::shared_ptr<Clock> clock) {
  MutexLock lock(&testClockMutex);
  testClock = std::move(clock);
}

std::shared_ptr<Clock> clockForNewSupervisor() {
  MutexLock lock(&testClockMutex);
  return testClock ? testClock : Clock::real();
}

ManualClock::ManualClock() : now_(SteadyClock::now()) {}

TimePoint ManualClock::now() {
  MutexLock lock(&mu_);
  return now_;
}

void ManualClock::enrol(const void* loop) {
  MutexLock lock(&mu_);
  loops_[loop] = TimePoint::min();
}

void ManualClock::leave(const void* loop) {
  MutexLock lock(&mu_);
  loops_.erase(loop);
  changed_.signalAll();
}

void ManualClock::waitUntil(const void* loop, Mutex& mu, CondVar& cv, TimePoint deadline) {
  {
    MutexLock lock(&mu_);
    loops_[loop] = deadline;
    changed_.signalAll();
  }
  // Short real waits: a stop() wakes the loop at once, an advance() within a millisecond.
  cv.waitFor(&mu, Millis(1));
  MutexLock lock(&mu_);
  if (now_ >= deadline) loops_[loop] = TimePoint::min();  // due: runs its round
}

bool ManualClock::settled() {
  for (const auto& [loop, deadline] : loops_)
    if (deadline <= now_) return false;
  return true;
}

void ManualClock::advance(Millis by, Millis step) {
  while (by > Millis(0)) {
    const Millis d = std::min(by, step);
    by -= d;
    MutexLock lock(&mu_);
    now_ += d;
    const auto giveUp = SteadyClock::now() + std::chrono::seconds(10);
    while (!settled() && SteadyClock::now() < giveUp) changed_.waitFor(&mu_, Millis(1));
  }
}

bool Ticker::wait(Millis period) {
  MutexLock lock(&mu_);
  const TimePoint deadline = clock_->now() + period;
  while (!stopping_ && clock_->now() < deadline) clock_->waitUntil(this, mu_, cv_, deadline);
  return !stopping_;
}

void Ticker::stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.signalAll();
}

}  // namespace commhost::supervisor
