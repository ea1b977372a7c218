// SPDX-License-Identifier: Apache-2.0
// Future: the result of an asynchronous operation, with continuation callbacks.
//
// Threading: any thread may complete a Future (once) and any thread may wait on it.
// Callbacks registered with then() run on the completing thread, or inline in then()
// if the future is already complete; they must not block. Comm hooks chain on it.
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <vector>

#include "commhost/export.h"
#include "commhost/mutex.h"
#include "commhost/tensor.h"

namespace commhost {

class Future;
using FuturePtr = std::shared_ptr<Future>;

class COMMHOST_API Future : public std::enable_shared_from_this<Future> {
 public:
  // User-provided, so that make_shared initialises member by member instead of first
  // zeroing the whole object with `rep stos` (slow to start: a tenth of a small op's
  // Future). No layout change.
  Future() noexcept {}
  static FuturePtr create() { return std::make_shared<Future>(); }
  static FuturePtr completed(std::vector<Tensor> value);

  // Exactly one of these is called once; a second call throws InvalidArgument.
  void setValue(std::vector<Tensor> value);
  void setError(std::exception_ptr error);

  bool isCompleted() const;
  // Waits and rethrows the error, if any. A zero timeout waits forever.
  // Throws TimeoutError when the timeout passes first.
  const std::vector<Tensor>& wait(std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  std::exception_ptr error() const;
  // Returns a future completed with fn's result, or fn's exception, or this future's error
  // (fn is then not called).
  FuturePtr then(std::function<std::vector<Tensor>(Future&)> fn);
  // Calls fn once the future completes, with a value or an error (inline if it has); fn
  // must not block or throw. For observers that need to see errors too (then() skips fn
  // on error).
  void whenDone(std::function<void(Future&)> fn);

 private:
  // Marks it done and hands back the callbacks, which runCallbacks() runs after the
  // mutex is released.
  std::vector<std::function<void()>> completeLocked() REQUIRES(mutex_);
  void runCallbacks(std::vector<std::function<void()>>& callbacks) EXCLUDES(mutex_);

  mutable Mutex mutex_;
  CondVar cv_;
  bool done_ GUARDED_BY(mutex_) = false;
  std::vector<Tensor> value_ GUARDED_BY(mutex_);  // set once, before done_
  std::exception_ptr error_ GUARDED_BY(mutex_);
  std::vector<std::function<void()>> callbacks_ GUARDED_BY(mutex_);
};

}  // namespace commhost
