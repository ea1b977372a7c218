// SPDX-License-Identifier: Apache-2.0
#include "commhost/future.h"

#include "commhost/errors.h"

namespace commhost {

FuturePtr Future::completed(std::vector<Tensor> value) {
  auto f = create();
  // No other thread holds `f` yet: nothing to lock and no waiter or callback to run.
  f->value_ = std::move(value);
  f->done_ = true;
  return f;
}

void Future::setValue(std::vector<Tensor> value) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (done_) throw InvalidArgument("Future completed twice (setValue after completion)");
  value_ = std::move(value);
  complete(lock);
}

void Future::setError(std::exception_ptr error) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (done_) throw InvalidArgument("Future completed twice (setError after completion)");
  error_ = std::move(error);
  complete(lock);
}

// Callbacks run outside the lock: they may call back into this future.
void Future::complete(std::unique_lock<std::mutex>& lock) {
  done_ = true;
  auto callbacks = std::move(callbacks_);
  callbacks_.clear();
  lock.unlock();
  cv_.notify_all();
  for (auto& cb : callbacks) cb();
}

bool Future::isCompleted() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}

std::exception_ptr Future::error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

const std::vector<Tensor>& Future::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (timeout.count() <= 0) {
    cv_.wait(lock, [&] { return done_; });
  } else if (!cv_.wait_for(lock, timeout, [&] { return done_; })) {
    throw TimeoutError("Future not completed within " + std::to_string(timeout.count()) + " ms");
  }
  if (error_) std::rethrow_exception(error_);
  return value_;
}

void Future::whenDone(std::function<void(Future&)> fn) {
  auto self = shared_from_this();
  auto run = [self, fn = std::move(fn)]() { fn(*self); };
  std::unique_lock<std::mutex> lock(mutex_);
  if (!done_) {
    callbacks_.push_back(std::move(run));
    return;
  }
  lock.unlock();
  run();
}

FuturePtr Future::then(std::function<std::vector<Tensor>(Future&)> fn) {
  auto next = create();
  auto self = shared_from_this();
  auto run = [self, next, fn = std::move(fn)]() {
    if (auto err = self->error()) {
      next->setError(err);
      return;
    }
    try {
      next->setValue(fn(*self));
    } catch (...) {
      next->setError(std::current_exception());
    }
  };
  std::unique_lock<std::mutex> lock(mutex_);
  if (!done_) {
    callbacks_.push_back(std::move(run));
    return next;
  }
  lock.unlock();
  run();
  return next;
}

}  // namespace commhost
