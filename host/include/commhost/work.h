// SPDX-License-Identifier: Apache-2.0
// Work: the handle of one operation in flight.
//
// Backends return a Work from every call and finish it from their own threads.
// isCompleted() never blocks. wait() returns true when the work finished, throws the
// work's error if it failed, and throws TimeoutError if `timeout` (or, when zero, the
// op's own deadline) passes first. abort() fails the work with AbortedError so every
// waiter returns; a backend may override it to also cancel the transfer.
//
// Most backends need only the ready-made implementations below: CompletedWork (or
// completedWork() for one output tensor) for ops that finish inside the call, and
// AsyncWork for ops finished later by calling finish() or fail() exactly once from any
// thread.
#pragma once

#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>

#include "commhost/export.h"
#include "commhost/future.h"
#include "commhost/mutex.h"
#include "commhost/options.h"

namespace commhost {

class COMMHOST_API Work {
 public:
  explicit Work(const OpContext& ctx) : ctx_(ctx) {}
  virtual ~Work() = default;
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  virtual bool isCompleted() = 0;
  virtual bool wait(std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) = 0;
  virtual std::exception_ptr exception() = 0;
  virtual void abort(const std::string& reason) = 0;
  // Completes with the op's output tensors (or error).
  virtual FuturePtr future() = 0;
  // For recv_any_source: the rank the message came from; -1 otherwise.
  virtual int sourceRank() const { return -1; }
  // How long the op ran on its device, in milliseconds: the time between events a device
  // backend recorded on its stream right before and right after the op's kernels (e.g.
  // cudaEventElapsedTime), so it leaves out the host's queueing and launch. Known only
  // once those events completed and the op succeeded; std::nullopt before that, for a
  // work that failed, for a backend that did not time this op (nccl without
  // enable_timing), and for cpu backends (the default). Never blocks; any thread. The
  // supervisor stores it in the flight recorder (device_ms) and completion events.
  virtual std::optional<double> deviceMs() { return std::nullopt; }

  OpType op() const { return ctx_.op; }
  uint64_t seq() const { return ctx_.seq; }
  std::chrono::milliseconds timeout() const { return ctx_.timeout; }

 protected:
  OpContext ctx_;
};
using WorkPtr = std::shared_ptr<Work>;

// A work finished before it is returned. Its Future is made on the first future() call:
// most callers only wait(), and making one per op (an allocation, a mutex and a condition
// variable, made and destroyed) was about a fifth of the host's own cost of an 8 B op.
class COMMHOST_API CompletedWork final : public Work {
 public:
  CompletedWork(const OpContext& ctx, std::vector<Tensor> outputs);
  bool isCompleted() override { return true; }
  bool wait(std::chrono::milliseconds = std::chrono::milliseconds(0)) override { return true; }
  std::exception_ptr exception() override { return nullptr; }
  void abort(const std::string&) override {}
  FuturePtr future() override;  // the same Future on every call, from any thread
  // The outputs it completed with, until future() takes them (then null): for the host's
  // check of the Work contract on the thread that got the work, before sharing it.
  const std::vector<Tensor>* pendingOutputs() const { return future_ ? nullptr : &outputs_; }

 private:
  std::once_flag made_;
  std::vector<Tensor> outputs_;  // moved into future_ when it is made
  FuturePtr future_;
};

// A finished work whose value is the one tensor `output`, as CompletedWork with a
// one-tensor vector but made by libcommhost (plugins never allocate it, so its layout is
// the host's own) and without the vector: an allocation less per op, about a fifth of an
// 8 B op's cost on a backend that completes it inline. WorkQueue::submit returns one for
// a job that returns a Tensor. A function of libcommhost, not a boundary type: a plugin
// that calls it needs a host that has it (an older host refuses it at load).
COMMHOST_API WorkPtr completedWork(const OpContext& ctx, Tensor output);

// A work finished later, from any thread, by finish() or fail().
class COMMHOST_API AsyncWork : public Work {
 public:
  explicit AsyncWork(const OpContext& ctx) : Work(ctx), future_(Future::create()) {}
  bool isCompleted() override { return future_->isCompleted(); }
  bool wait(std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) override;
  std::exception_ptr exception() override { return future_->error(); }
  void abort(const std::string& reason) override;
  FuturePtr future() override { return future_; }
  int sourceRank() const override { return sourceRank_; }

  // Both return false (and do nothing) when the work already finished, e.g. after abort().
  bool finish(std::vector<Tensor> outputs, int sourceRank = -1);
  bool fail(std::exception_ptr error);

 private:
  Mutex finishMutex_;  // makes the first of finish/fail/abort win
  bool finished_ GUARDED_BY(finishMutex_) = false;
  // Written once, by the finish() that wins, before the future completes; read after it
  // completed (the future's completion orders the two), so read without the mutex.
  int sourceRank_ = -1;
  FuturePtr future_;
};

}  // namespace commhost
