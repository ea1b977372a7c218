// SPDX-License-Identifier: Apache-2.0
#include "commhost/future.h"

#include "commhost/errors.h"

namespace commhost {

FuturePtr Future::completed(std::vector<Tensor> value) {
  auto f = create();
  // No other thread holds `f` yet: the lock is uncontended (it keeps the analysis whole).
  MutexLock lock(&f->mutex_);
  f->value_ = std::move(value);
  f->done_ = true;
  return f;
}

void Future::setValue(std::vector<Tensor> value) {
  std::vector<std::function<void()>> callbacks;
  {
    MutexLock lock(&mutex_);
    if (done_) throw InvalidArgument("Future completed twice (setValue after completion)");
    value_ = std::move(value);
    callbacks = completeLocked();
  }
  runCallbacks(callbacks);
}

void Future::setError(std::exception_ptr error) {
  std::vector<std::function<void()>> callbacks;
  {
    MutexLock lock(&mutex_);
    if (done_) throw InvalidArgument("Future completed twice (setError after completion)");
    error_ = std::move(error);
    callbacks = completeLocked();
  }
  runCallbacks(callbacks);
}

std::vector<std::function<void()>> Future::completeLocked() {
  done_ = true;
  auto callbacks = std::move(callbacks_);
  callbacks_.clear();
  return callbacks;
}

// Outside the lock: callbacks may call back into this future.
void Future::runCallbacks(std::vector<std::function<void()>>& callbacks) {
  cv_.signalAll();
  for (auto& cb : callbacks) cb();
}

bool Future::isCompleted() const {
  MutexLock lock(&mutex_);
  return done_;
}

std::exception_ptr Future::error() const {
  MutexLock lock(&mutex_);
  return error_;
}

const std::vector<Tensor>& Future::wait(std::chrono::milliseconds timeout) {
  MutexLock lock(&mutex_);
  if (timeout.count() <= 0) {
    while (!done_) cv_.wait(&mutex_);
  } else {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done_)
      if (!cv_.waitUntil(&mutex_, deadline) && !done_ && std::chrono::steady_clock::now() >= deadline)
        throw TimeoutError("Future not completed within " + std::to_string(timeout.count()) + " ms");
  }
  if (error_) std::rethrow_exception(error_);
  return value_;  // set once, before done_: the reference stays valid and unchanged
}

void Future::whenDone(std::function<void(Future&)> fn) {
  auto self = shared_from_this();
  auto run = [self, fn = std::move(fn)]() { fn(*self); };
  {
    MutexLock lock(&mutex_);
    if (!done_) {
      callbacks_.push_back(std::move(run));
      return;
    }
  }
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
  {
    MutexLock lock(&mutex_);
    if (!done_) {
      callbacks_.push_back(std::move(run));
      return next;
    }
  }
  run();
  return next;
}

}  // namespace commhost
