// SupervisedWork: the backend's work, plus the supervisor's verdict when an incident
// (deadline passed, peer lost) ends it. A waiter that sees the backend fail with a
// timeout or a lost peer waits briefly for the verdict, which names the ranks at fault.
#include "commhost/errors.h"
#include "supervisor.h"

namespace commhost::supervisor {

SupervisedWork::SupervisedWork(const OpContext& ctx, WorkPtr inner, std::shared_ptr<GroupMonitor> group,
                               uint64_t recordId, Clock::time_point issued, int64_t bytes, Millis verdictWait)
    : Work(ctx),
      inner_(std::move(inner)),
      group_(std::move(group)),
      recordId_(recordId),
      issued_(issued),
      bytes_(bytes),
      verdictWait_(verdictWait) {}

void SupervisedWork::noteEnd() {
  if (endedUs_.load(std::memory_order_acquire) != 0) return;
  int64_t expected = 0;
  endedUs_.compare_exchange_strong(expected, wallMicros(Clock::now()), std::memory_order_acq_rel);
}

bool SupervisedWork::hasVerdict() { return verdictSet_.load(std::memory_order_acquire); }

void SupervisedWork::setVerdict(std::exception_ptr error, const std::string& message) {
  ErrorCode code = ErrorCode::Backend;
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    code = e.code();
  } catch (...) {
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (verdict_) return;
    verdict_ = std::move(error);
    verdictCode_ = code;
    verdictMessage_ = message;
    verdictSet_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
  noteEnd();
  inner_->abort(message);  // wakes a waiter blocked in the backend's wait
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
std::exception_ptr ownCopy(ErrorCode code, const std::string& message) {
  try {
    raise(code, ErrorContext{}, message);
  } catch (...) {
    return std::current_exception();
  }
}
}  // namespace

std::exception_ptr SupervisedWork::freshVerdict() const { return ownCopy(verdictCode_, verdictMessage_); }

std::exception_ptr SupervisedWork::exception() {
  if (hasVerdict()) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (verdict_) return freshVerdict();
  }
  return inner_->exception();
}

bool SupervisedWork::wait(Millis timeout) {
  try {
    inner_->wait(timeout);
  } catch (const Error& e) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (verdict_) std::rethrow_exception(freshVerdict());
    // A shorter wait of the caller's own ended before the op's deadline: not an incident.
    const bool callersTimeout = e.code() == ErrorCode::Timeout && !inner_->isCompleted() && Clock::now() < deadline();
    const bool incident = e.code() == ErrorCode::Timeout || e.code() == ErrorCode::PeerLost;
    auto sup = supervisor_.lock();
    if (incident && !callersTimeout && sup) {
      cv_.wait_for(lock, verdictWait_, [&] { return verdict_ != nullptr; });
      if (verdict_) std::rethrow_exception(freshVerdict());
    }
    lock.unlock();
    noteEnd();
    if (sup && inner_->isCompleted()) sup->complete(*this);
    // The backend's error object is shared with its work, which the watchdog may drop
    // once the caller's WorkPtr is gone: the caller gets a copy made while it is alive.
    std::rethrow_exception(ownCopy(e.code(), e.what()));
  }
  noteEnd();
  if (auto sup = supervisor_.lock()) sup->complete(*this);
  return true;
}

}  // namespace commhost::supervisor
