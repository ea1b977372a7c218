// SPDX-License-Identifier: Apache-2.0
// Keeps the Gloo buffers of the last few finished ops alive a little longer.
//
// Why: Gloo's tcp::UnboundBuffer destructor waits, calling sched_yield in a loop, until
// Gloo's device thread has let go of the buffer, and that thread holds it until it has
// finished handling the op's last message, which is after it woke the op's waiter. An
// op's options (and so its buffers) destroyed the moment the op returns therefore race
// the device thread on every op. Measured with raw Gloo, 2 ranks on this 2-vCPU VM, 1 MiB
// allreduce, options made per op (as commhost and torch's ProcessGroupGloo do): about 600
// sched_yield and 1.5 million epoll_wait calls per 1000 ops and a mean of 1.4-2.7 ms in 8
// of 8 runs; the same options destroyed one op later: 1 sched_yield, 0.3 million
// epoll_wait, 0.9-1.1 ms (raw Gloo's own peer, which reuses one options object, is there).
//
// Only a successful op's buffers come here: every send and receive it posted has
// completed, so no Gloo thread will touch the memory they point to, and that memory may
// be freed meanwhile. A failed op's buffers are destroyed at once instead (the
// destructor's wait is what keeps a late receive out of freed memory).
//
// Threading: keep() from any op thread (workers; callers with threads: 0); clear() when
// the backend stops. The oldest entry is destroyed outside the lock.
#pragma once

#include <deque>
#include <memory>

#include "commhost/mutex.h"

namespace commhost::gloo_backend {

class Retired {
 public:
  // Long past the device thread's last touch of an op by the time this many more ops
  // (on any context) have finished.
  static constexpr size_t kKept = 4;

  void keep(std::shared_ptr<void> finished) EXCLUDES(mu_) {
    std::shared_ptr<void> oldest;
    MutexLock lock(&mu_);
    kept_.push_back(std::move(finished));
    if (kept_.size() > kKept) {
      oldest = std::move(kept_.front());
      kept_.pop_front();
    }
    // `oldest` is destroyed after `lock` is released (declared before it).
  }

  void clear() EXCLUDES(mu_) {
    std::deque<std::shared_ptr<void>> all;
    MutexLock lock(&mu_);
    all.swap(kept_);
  }

 private:
  Mutex mu_;
  std::deque<std::shared_ptr<void>> kept_ GUARDED_BY(mu_);
};

}  // namespace commhost::gloo_backend
