// SPDX-License-Identifier: Apache-2.0
// SupervisedWork: the backend's work, plus the supervisor's verdict when an incident
// (deadline passed, peer lost) ends it. A waiter that sees the backend fail with a
// timeout or a lost peer waits briefly for the verdict, which names the ranks at fault.
#include "supervised_work.h"
#include "commhost/errors.h"

#include "supervisor.h"

namespace commhost::supervisor {

SupervisedWork::SupervisedWork(const OpContext& ctx, WorkPtr inner, std::shared_ptr<GroupMonitor> group,
                               uint64_t recordId, TimePoint issued, int64_t bytes, Millis verdictWait,
                               std::shared_ptr<Clock> clock)
    : Work(ctx),
      inner_(std::move(inner)),
      group_(std::move(group)),
      recordId_(recordId),
      issued_(issued),
      bytes_(bytes),
      verdictWait_(verdictWait),
      clock_(std::move(clock)) {}

void SupervisedWork::noteEnd() {
  if (endedUs_.load(std::memory_order_acquire) != 0) return;
  int64_t expected = 0;
  endedUs_.compare_exchange_strong(expected, wallMicros(FastClock::now()), std::memory_order_acq_rel);
}

bool SupervisedWork::hasVerdict() { return verdictSet_.load(std::memory_order_acquire); }

ErrorFacts factsOf(const std::exception_ptr& error) {
  ErrorFacts facts;
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    facts.code = e.code();
    facts.where = e.where();
    facts.what = e.what();
  } catch (const std::exception& e) {
    facts.what = e.what();
  } catch (...) {
  }
  return facts;
}

void SupervisedWork::setVerdict(std::exception_ptr error, const std::string& message) {
  ErrorFacts facts = factsOf(error);
  FuturePtr outer;
  std::exception_ptr forOuter;
  {
    MutexLock lock(&mutex_);
    if (verdict_) return;
    verdict_ = std::move(error);
    verdictCode_ = facts.code;
    verdictMessage_ = message;
    verdictWhere_ = std::move(facts.where);
    verdictSet_.store(true, std::memory_order_release);
    if (outer_) {
      outer = outer_;
      forOuter = freshVerdict();
    }
  }
  cv_.signalAll();
  // Outside the lock: the future's callbacks run here, and may call this work.
  if (outer && !outerClaimed_->exchange(true)) outer->setError(forOuter);
  noteEnd();
  inner_->abort(message);  // wakes a waiter blocked in the backend's wait
}

FuturePtr SupervisedWork::future() {
  FuturePtr outer;
  std::exception_ptr verdict;
  {
    MutexLock lock(&mutex_);
    if (outer_) return outer_;
    outer_ = outer = Future::create();
    if (verdict_) verdict = freshVerdict();
  }
  if (verdict) {
    if (!outerClaimed_->exchange(true)) outer->setError(verdict);
    return outer;
  }
  inner_->future()->whenDone(
      [outer, claimed = outerClaimed_, expect = expect, ctx = ctx_, backend = backend](Future& done) {
        if (claimed->exchange(true)) return;
        if (auto error = done.error()) return outer->setError(error);
        const std::vector<Tensor>& value = done.wait();
        const std::string mismatch = outputMismatch(expect, value);
        if (mismatch.empty()) outer->setValue(value);
        else outer->setError(brokenContract(ctx, backend, mismatch));
      });
  return outer;
}

bool SupervisedWork::isCompleted() {
  if (!inner_->isCompleted() && !hasVerdict()) return false;
  noteEnd();
  return true;
}

namespace {
// Each caller gets an exception object of its own: a shared one would be read by a
// waiter (after its WorkPtr is gone) while the supervisor's thread drops the last
// reference to it.
// The copy keeps the error's context (Error::where(): group, rank, op, seq, peer).
std::exception_ptr ownCopy(ErrorCode code, const std::string& message, const ErrorContext& where) {
  try {
    rethrowAs(code, message, where);
  } catch (...) {
    return std::current_exception();
  }
}
}  // namespace

std::exception_ptr SupervisedWork::freshVerdict() const {
  return ownCopy(verdictCode_, verdictMessage_, verdictWhere_);
}

std::exception_ptr SupervisedWork::exception() {
  if (hasVerdict()) {
    MutexLock lock(&mutex_);
    if (verdict_) return freshVerdict();
  }
  return inner_->exception();
}

bool SupervisedWork::wait(Millis timeout) {
  try {
    inner_->wait(timeout);
  } catch (const Error& e) {
    std::shared_ptr<Supervisor> sup;
    {
      MutexLock lock(&mutex_);
      if (verdict_) std::rethrow_exception(freshVerdict());
      // A shorter wait of the caller's own ended before the op's deadline: not an incident.
      const bool callersTimeout = e.code() == ErrorCode::Timeout && !inner_->isCompleted() &&
                                  clock_->now() < deadline();
      const bool incident = e.code() == ErrorCode::Timeout || e.code() == ErrorCode::PeerLost;
      sup = supervisor_.lock();
      if (incident && !callersTimeout && sup) {
        // Real time: the verdict comes from the watchdog's round, whatever the clock.
        const auto until = SteadyClock::now() + verdictWait_;
        while (!verdict_ && SteadyClock::now() < until) cv_.waitUntil(&mutex_, until);
        if (verdict_) std::rethrow_exception(freshVerdict());
      }
    }
    noteEnd();
    if (sup && inner_->isCompleted()) sup->complete(*this);
    // The backend's error object is shared with its work, which the watchdog may drop
    // once the caller's WorkPtr is gone: the caller gets a copy made while it is alive.
    std::rethrow_exception(ownCopy(e.code(), e.what(), e.where()));
  }
  // A stream-ordered device backend (nccl's default) returns once the caller's stream is
  // ordered after the op, before the op ran: the watchdog records its end when it sees
  // it, with its device time, rather than this wait's time as if the op had ended.
  if (!inner_->isCompleted()) return true;
  noteEnd();
  if (auto sup = supervisor_.lock()) sup->complete(*this);
  return true;
}

GroupOpNow groupOpNow(const GroupMonitor& group, const std::vector<std::shared_ptr<SupervisedWork>>& running) {
  GroupOpNow now;
  for (const auto& w : running) {
    if (w->group().get() != &group) continue;
    ++now.inFlight;
    if (!now.oldest || w->issued() < now.oldest->issued()) now.oldest = w;
  }
  now.inCall = group.callInBackend();
  return now;
}

}  // namespace commhost::supervisor
