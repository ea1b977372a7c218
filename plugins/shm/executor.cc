#include "executor.h"

#include "commhost/errors.h"

namespace commhost::shm {

Executor::Executor(Channel& channel, const AbortFlag& abort) : channel_(channel), abort_(abort) {
  worker_ = std::thread([this] { workerLoop(); });
}

Executor::~Executor() {
  drain();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  worker_.join();
}

void Executor::checkUsable(const OpContext& ctx) {
  if (abort_.isSet()) {
    const ErrorContext where = ErrorContext::of(ctx);
    raise(ErrorCode::Aborted, where, "the shm backend was aborted (" + abort_.reason() + ")");
  }
  if (broken_.load(std::memory_order_acquire)) {
    std::string reason;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      reason = brokenReason_;
    }
    const ErrorContext where = ErrorContext::of(ctx);
    raise(ErrorCode::Backend, where, "the shm backend is unusable after an earlier op failed: " + reason,
          "Ranks no longer agree on the shared-memory steps; destroy this group and create a new one.");
  }
}

std::exception_ptr Executor::failed(const OpContext& ctx, std::exception_ptr error) {
  const ErrorContext where = ErrorContext::of(ctx);
  try {
    std::rethrow_exception(error);
  } catch (const InvalidArgument&) {
    return error;  // every rank found the same problem before moving data: still in step
  } catch (const Error& e) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!broken_.load(std::memory_order_relaxed)) brokenReason_ = e.what();
  } catch (const std::exception& e) {
    error = std::make_exception_ptr(BackendError(where.format() + "shm: " + e.what(), where));
    std::lock_guard<std::mutex> lock(mutex_);
    if (!broken_.load(std::memory_order_relaxed)) brokenReason_ = e.what();
  }
  broken_.store(true, std::memory_order_release);
  return error;
}

WorkPtr Executor::enqueue(const OpContext& ctx, Job job) {
  auto work = std::make_shared<AsyncWork>(ctx);
  pending_.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back({work, std::move(job), ctx});
  }
  wake_.notify_one();
  return work;
}

void Executor::workerLoop() {
  while (true) {
    Item item;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      item = std::move(queue_.front());
      queue_.pop_front();
      running_ = item.work;
    }
    try {
      checkUsable(item.context);  // an op queued behind a failure or abort never touches the segment
      channel_.start({&item.context, Clock::now() + item.context.timeout});
      item.work->finish(item.job());
    } catch (...) {
      item.work->fail(failed(item.context, std::current_exception()));
    }
    item = Item{};  // release the op's tensors before reporting idle
    {
      std::lock_guard<std::mutex> lock(mutex_);
      running_.reset();
      if (pending_.fetch_sub(1, std::memory_order_release) == 1) idle_.notify_all();
    }
  }
}

void Executor::abort(const std::string& reason) {
  std::deque<Item> queued;
  std::shared_ptr<AsyncWork> running;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queued = queue_;  // the worker still pops (and fails) them, keeping pending_ exact
    running = running_;
  }
  for (auto& item : queued) item.work->abort(reason);
  if (running) running->abort(reason);
}

void Executor::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
}

}  // namespace commhost::shm
