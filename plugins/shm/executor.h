// Runs the shm backend's ops one at a time, in submission (seq) order, on one of two
// threads: the caller's, inline, when the op is small and nothing is queued or running
// (the < 1 us path: no hand-off, no wake-up), else the backend's worker thread.
//
// Threading and ownership:
// - submit() is called by the group's thread only (calls arrive in seq order).
// - pending_ counts ops queued or running on the worker. The caller increments it
//   before queueing; the worker decrements it (release) after an op is finished. The
//   caller runs inline only when it reads 0 (acquire), so the Channel (and the segment
//   steps it owns) is used by exactly one thread at a time, and ops never reorder.
// - queue_, stopping_ are guarded by mutex_. broken_ (set once, then read) is an atomic
//   flag with its reason guarded by mutex_.
// - After an op fails with anything but InvalidArgument (a timeout, a lost peer, an
//   abort), the ranks' step counters no longer agree, so every later op fails at once
//   with that first error named: the group must be rebuilt.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "channel.h"
#include "commhost/work.h"

namespace commhost::shm {

class Executor {
 public:
  using Job = std::function<std::vector<Tensor>()>;

  Executor(Channel& channel, const AbortFlag& abort);
  ~Executor();  // drains, then joins the worker

  // Runs job() (returning the op's outputs) inline when `small` and the backend is idle,
  // else on the worker. Throws AbortedError / BackendError when the backend is aborted or
  // broken; the op's own failures go to its Work.
  template <class F>
  WorkPtr submit(const OpContext& ctx, bool small, F&& job) {
    checkUsable(ctx);
    if (small && pending_.load(std::memory_order_acquire) == 0) {
      channel_.start({&ctx, Clock::now() + ctx.timeout});
      try {
        return std::make_shared<CompletedWork>(ctx, job());
      } catch (...) {
        auto work = std::make_shared<AsyncWork>(ctx);
        work->fail(failed(ctx, std::current_exception()));
        return work;
      }
    }
    return enqueue(ctx, Job(std::forward<F>(job)));
  }

  // Fails queued and running works with AbortedError (the running op's waits notice the
  // AbortFlag, which the backend sets first).
  void abort(const std::string& reason);
  // Waits until nothing is queued or running.
  void drain();

 private:
  struct Item {
    std::shared_ptr<AsyncWork> work;
    Job job;
    OpContext context;
  };
  WorkPtr enqueue(const OpContext& ctx, Job job);
  void workerLoop();
  void checkUsable(const OpContext& ctx);
  // Describes the error of a failed op (rank, op, seq) and marks the backend broken.
  std::exception_ptr failed(const OpContext& ctx, std::exception_ptr error);

  Channel& channel_;
  const AbortFlag& abort_;
  std::atomic<int> pending_{0};
  std::atomic<bool> broken_{false};
  std::mutex mutex_;
  std::condition_variable wake_;  // worker: an item or stop
  std::condition_variable idle_;  // drain(): pending_ reached 0
  std::deque<Item> queue_;
  std::shared_ptr<AsyncWork> running_;  // the worker's current op, for abort(); under mutex_
  std::string brokenReason_;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace commhost::shm
