// SPDX-License-Identifier: Apache-2.0
#include "commhost/work.h"

#include "commhost/errors.h"
#include "commhost/sdk/option_schema.h"
#include "recycling_allocator.h"
#include "tensor_work.h"

namespace commhost {

CompletedWork::CompletedWork(const OpContext& ctx, std::vector<Tensor> outputs)
    : Work(ctx), outputs_(std::move(outputs)) {}

FuturePtr CompletedWork::future() {
  std::call_once(made_, [this] { future_ = Future::completed(std::move(outputs_)); });
  return future_;
}

FuturePtr TensorWork::future() {
  std::call_once(made_, [this] {
    std::vector<Tensor> value;
    value.push_back(std::move(output_));
    future_ = Future::completed(std::move(value));
  });
  return future_;
}

WorkPtr completedWork(const OpContext& ctx, Tensor output) {
  // One per inline op, dropped by its caller soon after: its block (work and control
  // block together) comes from the freeing thread's few spares (recycling_allocator.h).
  return std::allocate_shared<TensorWork>(RecyclingAllocator<TensorWork>(), ctx, std::move(output));
}

bool AsyncWork::wait(std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) timeout = ctx_.timeout;
  try {
    future_->wait(timeout);
  } catch (const TimeoutError&) {
    // Completed after all (just now, or the op itself failed with a timeout): its own result.
    if (future_->isCompleted()) {
      if (auto error = future_->error()) std::rethrow_exception(error);
      return true;
    }
    raise(ErrorCode::Timeout, ErrorContext::of(ctx_),
          "not completed within " + formatDuration(timeout) + "; a peer may be missing this collective or be slow",
          "Check that every rank issues the same collectives in the same order, or raise the timeout");
  }
  return true;
}

bool AsyncWork::finish(std::vector<Tensor> outputs, int sourceRank) {
  {
    MutexLock lock(&finishMutex_);
    if (finished_) return false;
    finished_ = true;
    sourceRank_ = sourceRank;
  }
  future_->setValue(std::move(outputs));
  return true;
}

bool AsyncWork::fail(std::exception_ptr error) {
  {
    MutexLock lock(&finishMutex_);
    if (finished_) return false;
    finished_ = true;
  }
  future_->setError(std::move(error));
  return true;
}

void AsyncWork::abort(const std::string& reason) {
  const ErrorContext where = ErrorContext::of(ctx_);
  fail(std::make_exception_ptr(AbortedError(where.format() + "aborted: " + reason, where)));
}

}  // namespace commhost
