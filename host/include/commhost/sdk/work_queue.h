// SPDX-License-Identifier: Apache-2.0
// A backend's worker queue: ops run in submission order on a fixed set of worker threads
// (c10d's AsyncWork queue), or on the caller's thread when there are no workers or, on
// request, when the queue is idle. Each op's Work finishes with the job's outputs or
// fails with the error the backend's describe hook makes of its exception.
//
// Ownership: the queue owns its worker threads (started by the constructor, joined by the
// destructor after it drains) and the items queued; an item holds its job and Work until
// a worker has run it. The backend owns the queue, and whatever its hooks and jobs touch
// must outlive it (destroy the queue first). A job runs on exactly one thread.
//
// Threading: submit() from any thread, except that inlineWhenIdle needs one submitting
// thread (a backend's calls come from its group's thread in seq order): "idle" is read,
// then the op runs, and only the submitter adds work in between, so inline and queued
// ops never overlap or reorder. abort(), drain() and stuckAfterAbort() from any thread.
// Hooks run on the thread that runs the op; `describe` may also run under mutex_ (on a
// worker, so that stuckAfterAbort() cannot report "stuck" while it runs), so it must
// not call back into the queue.
//
// Abort: abort() fails every queued and running Work with AbortedError at once; queued
// jobs never run; a running job keeps its thread until it returns (the backend makes it
// return, e.g. through its own abort flag, or leaks the queue, see stuckAfterAbort());
// its result or error is then dropped. Later submits throw AbortedError. drain() waits
// until nothing is queued or running, or until abort().
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "commhost/export.h"
#include "commhost/mutex.h"
#include "commhost/thread_annotations.h"
#include "commhost/work.h"

namespace commhost {

// A job's one output tensor, moved into a vector (from a `mutable` job's capture):
// `std::vector<Tensor>{t}` copies out of its initializer list, an atomic refcount
// increment and decrement more on every small op's path. A job for submit() may instead
// return the Tensor itself (see there).
inline std::vector<Tensor> jobOutput(Tensor&& t) {
  std::vector<Tensor> out;
  out.push_back(std::move(t));
  return out;
}

class COMMHOST_API WorkQueue {
 public:
  using Job = std::function<std::vector<Tensor>()>;
  struct Hooks {
    // Turns a job's exception into the error its Work fails with (rank, op, seq; the
    // error's kind). Unset: the exception as thrown.
    std::function<std::exception_ptr(const OpContext&, std::exception_ptr)> describe;
    // Runs right before each job on the thread that runs it, with the op's context
    // (alive until the job returns); what it throws fails the op like the job's own
    // error. E.g. refuse ops queued behind a failure, or bind the op to a channel.
    std::function<void(const OpContext&)> beforeEach;
    // Runs once on each worker thread as it starts, before any op (e.g. moves it to the
    // CPUs meant for workers). Never on a caller's thread, which is the application's,
    // also when an op runs inline there.
    std::function<void()> workerStart;
  };

  // `name` (e.g. "gloo backend") is named in errors. threads == 0: every op runs inside
  // submit(), on the caller's thread. `idleSpin`: how long a worker that ran out of ops
  // keeps polling for the next one, yielding its CPU to any runnable thread, before it
  // sleeps. A caller issuing op after op then hands each to an awake worker (no wake-up),
  // and the worker's CPU does not go idle between ops (in a VM an idle vCPU can take
  // 4-8 ms to wake for the transport's next packet). Worth it only while each rank has a
  // CPU of its own (see usableCpus()); 0: sleep at once.
  WorkQueue(std::string name, int threads, Hooks hooks, std::chrono::microseconds idleSpin = {});
  // CPUs this process may run on (its affinity mask), at least 1: what a backend compares
  // its ranks per host with before it spins.
  static int usableCpus();
  ~WorkQueue();  // drains, then joins the workers
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Runs `job` inline (no workers, or inlineWhenIdle and nothing queued or running: no
  // hand-off, no allocation of a std::function) or queues it. The Work finishes with the
  // job's outputs or fails with its described error. A job returns its outputs, a
  // std::vector<Tensor>, or its one output, a Tensor: inline, the second is a
  // completedWork() (work.h), an allocation less per op. `work`, when given, is the Work
  // returned, which the job may finish itself (e.g. with a source rank); finishing it
  // again is then a no-op. Throws AbortedError after abort().
  template <class F>
  WorkPtr submit(const OpContext& ctx, F&& job, bool inlineWhenIdle = false,
                 std::shared_ptr<AsyncWork> work = nullptr) {
    using Result = std::invoke_result_t<F&>;
    static_assert(std::is_same_v<Result, Tensor> || std::is_same_v<Result, std::vector<Tensor>>,
                  "a WorkQueue job returns its outputs by value: a std::vector<Tensor>, or one Tensor");
    if (aborted_.load(std::memory_order_acquire)) throwAborted(ctx);
    if (threads_ == 0 || (inlineWhenIdle && pending_.load(std::memory_order_acquire) == 0)) {
      try {
        if (hooks_.beforeEach) hooks_.beforeEach(ctx);
        if (!work) return completed(ctx, job());
        work->finish(outputsOf(job()));
        return work;
      } catch (...) {
        if (!work) work = std::make_shared<AsyncWork>(ctx);
        work->fail(describe(ctx, std::current_exception()));
        return work;
      }
    }
    if constexpr (std::is_same_v<Result, Tensor>)
      return enqueue(ctx, Job([job = std::forward<F>(job)]() mutable { return jobOutput(job()); }), std::move(work));
    else return enqueue(ctx, Job(std::forward<F>(job)), std::move(work));
  }

  // Fails every queued and running Work with AbortedError (reason named); later submits
  // throw. Running jobs are not interrupted.
  void abort(const std::string& reason);
  // Waits until nothing is queued or running, or until abort().
  void drain();
  // True after abort() while a job still runs (e.g. inside a transport that returns only
  // at its own timeout): its owner may then leak the queue instead of joining it.
  bool stuckAfterAbort();
  // Nothing queued or running (a hint, except to the one submitting thread).
  bool idle() const { return pending_.load(std::memory_order_acquire) == 0; }

 private:
  struct Item {
    std::shared_ptr<AsyncWork> work;
    Job job;
    OpContext context;
  };
  WorkPtr enqueue(const OpContext& ctx, Job job, std::shared_ptr<AsyncWork> work);
  static WorkPtr completed(const OpContext& ctx, std::vector<Tensor> outputs) {
    return std::make_shared<CompletedWork>(ctx, std::move(outputs));
  }
  static WorkPtr completed(const OpContext& ctx, Tensor output) { return completedWork(ctx, std::move(output)); }
  static std::vector<Tensor> outputsOf(std::vector<Tensor> outputs) { return outputs; }
  static std::vector<Tensor> outputsOf(Tensor output) { return jobOutput(std::move(output)); }
  void workerLoop();
  std::exception_ptr describe(const OpContext& ctx, const std::exception_ptr& error) const;
  [[noreturn]] void throwAborted(const OpContext& ctx);

  const std::string name_;
  const int threads_;
  const std::chrono::microseconds idleSpin_;
  const Hooks hooks_;
  // Items queued plus items running. Incremented by submit() before an item is queued,
  // decremented (release) by the worker once the item is done and its tensors released,
  // or by abort() for the queued items it removes: a submitter that reads 0 (acquire)
  // sees everything the last op did.
  std::atomic<int> pending_{0};
  std::atomic<bool> aborted_{false};  // set once, by abort(), under mutex_
  mutable Mutex mutex_;
  CondVar wake_;  // workers: an item or stopping_
  CondVar idle_;  // drain(): pending_ reached 0, or abort()
  std::deque<Item> queue_ GUARDED_BY(mutex_);
  std::vector<std::shared_ptr<AsyncWork>> running_ GUARDED_BY(mutex_);  // the workers' current items
  std::string abortReason_ GUARDED_BY(mutex_);
  bool stopping_ GUARDED_BY(mutex_) = false;
  std::vector<std::thread> workers_;  // started by the constructor, joined by the destructor
};

}  // namespace commhost
