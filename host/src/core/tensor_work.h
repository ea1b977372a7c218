// SPDX-License-Identifier: Apache-2.0
// Internal: the work completedWork() (commhost/work.h) makes. Its layout is libcommhost's
// own (plugins never allocate it), so it may change without touching the plugin ABI.
#pragma once

#include <mutex>

#include "commhost/export.h"
#include "commhost/work.h"

namespace commhost {

// A work finished before it is returned, whose value is one tensor. Held in place, not
// in a vector: a vector allocated and freed per op was a fifth of an 8 B shm op's cost
// (BM_ShmDispatch). The Future (a vector of one) is made on the first future() call.
// Exported for the unit tests' typeid checks; plugins only see a Work.
class COMMHOST_API TensorWork final : public Work {
 public:
  TensorWork(const OpContext& ctx, Tensor output) : Work(ctx), output_(std::move(output)) {}
  bool isCompleted() override { return true; }
  bool wait(std::chrono::milliseconds = std::chrono::milliseconds(0)) override { return true; }
  std::exception_ptr exception() override { return nullptr; }
  void abort(const std::string&) override {}
  FuturePtr future() override;  // the same Future on every call, from any thread
  // The output, until future() takes it (then null), as CompletedWork::pendingOutputs:
  // for the host's check of the Work contract on the thread that got the work, before
  // sharing it (future() may run on any thread afterwards).
  const Tensor* pendingOutput() const { return future_ ? nullptr : &output_; }

 private:
  std::once_flag made_;
  Tensor output_;  // moved into future_ when it is made
  FuturePtr future_;
};

}  // namespace commhost
