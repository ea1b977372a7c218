#include "work_queue.h"

#include "commhost/errors.h"

namespace commhost::gloo_backend {

WorkQueue::WorkQueue(int threads, Describe describe) : describe_(std::move(describe)) {
  for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { workerLoop(); });
}

WorkQueue::~WorkQueue() {
  drain();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

WorkPtr WorkQueue::enqueue(const OpContext& ctx, Job job, std::shared_ptr<AsyncWork> work) {
  if (!work) work = std::make_shared<AsyncWork>(ctx);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!aborted_.empty())
      throw AbortedError(std::string(opName(ctx.op)) + " seq " + std::to_string(ctx.seq) +
                         ": the gloo backend was aborted (" + aborted_ + ")");
    if (!workers_.empty()) {
      queue_.push_back({work, std::move(job), ctx});
      wake_.notify_one();
      return work;
    }
  }
  // No workers: run on the caller's thread, as raw Gloo does (no hand-off, no overlap).
  try {
    work->finish(job());
  } catch (...) {
    work->fail(describe_(ctx, std::current_exception()));
  }
  return work;
}

void WorkQueue::workerLoop() {
  while (true) {
    Item item;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      item = std::move(queue_.front());
      queue_.pop_front();
      running_.insert(item.work);
    }
    try {
      item.work->finish(item.job());
    } catch (...) {
      // After abort() the work has failed already, and the backend behind describe_
      // may be gone (it leaks a queue stuck in Gloo rather than wait): describe only
      // while not aborted, under the lock that stuckAfterAbort() takes, so the backend
      // cannot decide it is stuck and return from its destructor in between. The work
      // fails outside the lock (its callbacks may enqueue).
      std::exception_ptr error;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (aborted_.empty()) error = describe_(item.context, std::current_exception());
      }
      if (error) item.work->fail(error);
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      running_.erase(item.work);
      if (queue_.empty() && running_.empty()) idle_.notify_all();
    }
  }
}

void WorkQueue::abort(const std::string& reason) {
  std::deque<Item> queued;
  std::set<std::shared_ptr<AsyncWork>> running;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    aborted_ = reason.empty() ? "no reason given" : reason;
    queued.swap(queue_);
    running = running_;
    if (running_.empty()) idle_.notify_all();
  }
  for (auto& item : queued) item.work->abort(reason);
  for (auto& work : running) work->abort(reason);
}

bool WorkQueue::stuckAfterAbort() {
  std::lock_guard<std::mutex> lock(mutex_);
  return !aborted_.empty() && !running_.empty();
}

void WorkQueue::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [&] { return queue_.empty() && (running_.empty() || !aborted_.empty()); });
}

}  // namespace commhost::gloo_backend
