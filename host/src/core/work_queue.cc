// SPDX-License-Identifier: Apache-2.0
#include "commhost/sdk/work_queue.h"

#include <sched.h>

#include <algorithm>

#include "commhost/errors.h"
#include "commhost/sdk/backend_sdk.h"

namespace commhost {

WorkQueue::WorkQueue(std::string name, int threads, Hooks hooks, std::chrono::microseconds idleSpin)
    : name_(std::move(name)), threads_(threads), idleSpin_(idleSpin), hooks_(std::move(hooks)) {
  for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { workerLoop(); });
}

WorkQueue::~WorkQueue() {
  drain();
  {
    MutexLock lock(&mutex_);
    stopping_ = true;
  }
  wake_.signalAll();
  for (auto& t : workers_) t.join();
}

void WorkQueue::throwAborted(const OpContext& ctx) {
  std::string reason;
  {
    MutexLock lock(&mutex_);
    reason = abortReason_;
  }
  raise(ErrorCode::Aborted, ErrorContext::of(ctx), "the " + name_ + " was aborted (" + reason + ")",
        "Create a new group to continue");
}

std::exception_ptr WorkQueue::describe(const OpContext& ctx, const std::exception_ptr& error) const {
  return hooks_.describe ? hooks_.describe(ctx, error) : error;
}

WorkPtr WorkQueue::enqueue(const OpContext& ctx, Job job, std::shared_ptr<AsyncWork> work) {
  if (!work) work = std::make_shared<AsyncWork>(ctx);
  bool queued = false;
  {
    MutexLock lock(&mutex_);
    if (!aborted_.load(std::memory_order_relaxed)) {
      pending_.fetch_add(1, std::memory_order_relaxed);
      queue_.push_back({work, std::move(job), ctx});
      queued = true;
    }
  }
  if (!queued) throwAborted(ctx);  // abort() came between submit()'s check and the lock
  wake_.signal();                  // outside the lock: the worker it wakes takes the lock at once
  return work;
}

int WorkQueue::usableCpus() { return std::max(1, static_cast<int>(allowedCpus().size())); }

void WorkQueue::workerLoop() {
  if (hooks_.workerStart) hooks_.workerStart();
  while (true) {
    Item item;
    // Poll for the next op before sleeping (see idleSpin in the header). pending_ counts
    // queued and running ops, so with several workers a busy peer ends the poll at once.
    if (idleSpin_.count() > 0 && pending_.load(std::memory_order_acquire) == 0) {
      const auto until = std::chrono::steady_clock::now() + idleSpin_;
      while (pending_.load(std::memory_order_acquire) == 0 && std::chrono::steady_clock::now() < until) ::sched_yield();
    }
    {
      MutexLock lock(&mutex_);
      while (!stopping_ && queue_.empty()) wake_.wait(&mutex_);
      if (queue_.empty()) return;
      item = std::move(queue_.front());
      queue_.pop_front();
      running_.push_back(item.work);
    }
    try {
      if (hooks_.beforeEach) hooks_.beforeEach(item.context);
      item.work->finish(item.job());
    } catch (...) {
      // After abort() the work has failed already, and the backend behind describe may
      // be gone (a backend leaks a queue stuck in its transport rather than wait):
      // describe only while not aborted, under the lock stuckAfterAbort() takes, so the
      // backend cannot decide it is stuck and return from its destructor in between. The
      // work fails outside the lock (its callbacks may submit).
      std::exception_ptr error;
      {
        MutexLock lock(&mutex_);
        if (!aborted_.load(std::memory_order_relaxed)) error = describe(item.context, std::current_exception());
      }
      if (error) item.work->fail(error);
    }
    std::shared_ptr<AsyncWork> done = std::move(item.work);
    item = Item{};  // release the op's tensors before reporting idle
    {
      MutexLock lock(&mutex_);
      running_.erase(std::find(running_.begin(), running_.end(), done));
      if (pending_.fetch_sub(1, std::memory_order_release) == 1) idle_.signalAll();
    }
  }
}

void WorkQueue::abort(const std::string& reason) {
  std::deque<Item> queued;
  std::vector<std::shared_ptr<AsyncWork>> running;
  {
    MutexLock lock(&mutex_);
    if (!aborted_.load(std::memory_order_relaxed)) abortReason_ = reason.empty() ? "no reason given" : reason;
    aborted_.store(true, std::memory_order_release);
    queued.swap(queue_);
    pending_.fetch_sub(static_cast<int>(queued.size()), std::memory_order_release);
    running = running_;
  }
  idle_.signalAll();
  // Outside the lock: a work's callbacks may call back into the backend.
  for (auto& item : queued) item.work->abort(reason);
  for (auto& work : running) work->abort(reason);
}

bool WorkQueue::stuckAfterAbort() {
  MutexLock lock(&mutex_);
  return aborted_.load(std::memory_order_relaxed) && !running_.empty();
}

void WorkQueue::drain() {
  MutexLock lock(&mutex_);
  while (pending_.load(std::memory_order_acquire) != 0 && !aborted_.load(std::memory_order_relaxed))
    idle_.wait(&mutex_);
}

}  // namespace commhost
