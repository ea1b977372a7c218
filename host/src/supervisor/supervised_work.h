// SPDX-License-Identifier: Apache-2.0
// The Work a group returns while supervised: the backend's work plus the supervisor's
// verdict (a richer TimeoutError / PeerLostError) when an incident ends it.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "clock.h"
#include "commhost/errors.h"
#include "commhost/mutex.h"
#include "commhost/work.h"
#include "group_monitor.h"
#include "output_check.h"

namespace commhost::supervisor {

// What the supervisor reads from a backend's error: its kind (Backend for anything that
// is not a commhost::Error), its context (Error::where(): the peer it names) and its text.
struct ErrorFacts {
  ErrorCode code = ErrorCode::Backend;
  ErrorContext where;
  std::string what = "unknown error";
};
ErrorFacts factsOf(const std::exception_ptr& error);

class Supervisor;

class SupervisedWork final : public Work {
 public:
  SupervisedWork(const OpContext& ctx, WorkPtr inner, std::shared_ptr<GroupMonitor> group, uint64_t recordId,
                 TimePoint issued, int64_t bytes, Millis verdictWait, std::shared_ptr<Clock> clock);
  bool isCompleted() override;
  bool wait(Millis timeout = Millis(0)) override EXCLUDES(mutex_);
  std::exception_ptr exception() override EXCLUDES(mutex_);
  void abort(const std::string& reason) override { inner_->abort(reason); }
  // Completes with the backend's result, or with the verdict when that comes first (a
  // lost peer's work stuck in a backend until its own timeout): what chains on it (a comm
  // hook, the Reducer's bucket) ends when wait() would.
  FuturePtr future() override EXCLUDES(mutex_);
  int sourceRank() const override { return inner_->sourceRank(); }
  std::optional<double> deviceMs() override { return inner_->deviceMs(); }

  // Watchdog thread: ends the work with `error` and wakes every waiter.
  void setVerdict(std::exception_ptr error, const std::string& message) EXCLUDES(mutex_);
  bool hasVerdict();
  void noteEnd();  // records when completion was first seen
  void attachTo(std::weak_ptr<Supervisor> supervisor) { supervisor_ = std::move(supervisor); }
  // True for the one caller that records the completion (see Supervisor::complete).
  bool claimFinalize() { return !finalized_.exchange(true, std::memory_order_acq_rel); }
  bool finalized() const { return finalized_.load(std::memory_order_acquire); }
  // Watchdog thread only: when a backend's peer-lost error was first seen.
  TimePoint peerErrorSeen{};

  const WorkPtr& inner() const { return inner_; }
  const std::shared_ptr<GroupMonitor>& group() const { return group_; }
  uint64_t recordId() const { return recordId_; }
  TimePoint issued() const { return issued_; }
  TimePoint deadline() const { return issued_ + ctx_.timeout; }
  int64_t bytes() const { return bytes_; }
  int64_t endedUs() const { return endedUs_.load(std::memory_order_acquire); }
  const OpContext& context() const { return ctx_; }

  // Set by track() before the work is shared.
  std::string backend;
  int64_t issuedUs = 0;  // wall clock, as the flight recorder shows it
  OutputSpec expect;     // what future()'s value must match (output_check.h)

 private:
  std::exception_ptr freshVerdict() const REQUIRES(mutex_);  // a new copy of the verdict

  WorkPtr inner_;
  std::shared_ptr<GroupMonitor> group_;
  uint64_t recordId_;
  TimePoint issued_;
  int64_t bytes_;
  Millis verdictWait_;
  std::shared_ptr<Clock> clock_;
  std::atomic<int64_t> endedUs_{0};
  std::atomic<bool> finalized_{false};
  std::weak_ptr<Supervisor> supervisor_;  // weak: a work may outlive every group
  Mutex mutex_;
  CondVar cv_;
  std::atomic<bool> verdictSet_{false};  // verdict_ is set: lets the common path skip mutex_
  std::exception_ptr verdict_ GUARDED_BY(mutex_);
  FuturePtr outer_ GUARDED_BY(mutex_);  // future()'s, made at the first call
  // Whoever sets outer_ first (the backend's completion or the verdict): it completes once.
  std::shared_ptr<std::atomic<bool>> outerClaimed_ = std::make_shared<std::atomic<bool>>(false);
  ErrorCode verdictCode_ GUARDED_BY(mutex_) = ErrorCode::Backend;
  std::string verdictMessage_ GUARDED_BY(mutex_);
  ErrorContext verdictWhere_ GUARDED_BY(mutex_);  // the verdict's context, kept by every copy
};

// What a group is in now, as `commhost status` and the SIGTERM report both name it: its
// oldest work in flight (the earliest issued of `running`, Supervisor::running()), else
// the op a backend runs inside the call, which has no work until the call returns.
struct GroupOpNow {
  std::shared_ptr<SupervisedWork> oldest;  // null: none of `running` is the group's
  size_t inFlight = 0;                     // of `running`, the group's
  GroupMonitor::IssuedOp inCall;           // seq 0: no call is inside its backend
};
GroupOpNow groupOpNow(const GroupMonitor& group, const std::vector<std::shared_ptr<SupervisedWork>>& running);

}  // namespace commhost::supervisor
