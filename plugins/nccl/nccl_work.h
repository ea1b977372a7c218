// SPDX-License-Identifier: Apache-2.0
// The work of one NCCL op, and the watchdog that finishes works.
//
// An op runs on its device's NCCL stream between two events: the stream first waits on
// the caller's stream (OpContext::stream), and `end` is recorded after the NCCL calls.
// With enable_timing, `timedStart` is recorded on the NCCL stream right before the NCCL
// calls (after the wait and the NaN check) and `end` keeps its timing, so deviceMs() is
// the NCCL calls' own time on the device; without it neither event carries timing, which
// costs less per op (as c10d's TORCH_NCCL_ENABLE_TIMING).
// isCompleted() queries `end` (never blocks). wait() either makes the caller's stream
// wait on `end` and returns at once (the default), or, with blocking_wait (and always
// for barrier), polls `end` on the CPU until it fires or the op's timeout passes (then
// aborts the communicator and throws TimeoutError).
//
// The watchdog thread (one per backend) owns every work in flight: it polls `end`,
// finishes the work's future (releasing the tensors the work kept alive), and fails it
// on an NCCL async error or when its timeout passes (aborting the communicator, as
// c10d's watchdog does, since a timed-out NCCL op never ends by itself).
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "commhost/mutex.h"
#include "commhost/work.h"
#include "communicator.h"

namespace commhost::nccl_backend {

// What an op that is not only NCCL calls (the intra-node kernels, intra_comm.h) adds to
// its work; either may be empty.
struct WorkHooks {
  std::function<void()> verify;  // once `end` fired: throws the op's error if it failed on the device
  std::function<void()> abort;   // beside the communicator's abort: ends a kernel waiting on a peer
};

class NcclWork final : public AsyncWork {
 public:
  // `start`, `timedStart` (null unless timed) and `end` are owned by the work (destroyed
  // with it). `keep` holds every tensor of the op until it ends; `outputs` is what the
  // future completes with.
  NcclWork(const OpContext& ctx, std::shared_ptr<Communicator> comm, cudaEvent_t start, cudaEvent_t timedStart,
           cudaEvent_t end, bool blockingWait, std::vector<Tensor> keep, std::vector<Tensor> outputs);
  ~NcclWork() override;

  bool isCompleted() override;
  bool wait(std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) override;
  // Fails the work with AbortedError and aborts the communicator: one NCCL op cannot be
  // cancelled alone.
  void abort(const std::string& reason) override;
  // cudaEventElapsedTime(timedStart, end) once both fired and the work did not fail;
  // nullopt without enable_timing. Never blocks.
  std::optional<double> deviceMs() override;

  // The watchdog's step: true once the work is finished (done, failed or aborted).
  bool poll();
  // After `end` fired: runs the verify hook and finishes or fails the future, once.
  void finishEnded();
  // Set before the work is shared (given to the watchdog or returned).
  void setHooks(WorkHooks hooks);

 private:
  // Fails the work with `code` and `what`, aborting the communicator when asked.
  void failWith(ErrorCode code, const std::string& what, const std::string& hint, bool abortComm);
  // cudaEventQuery(end_): 1 done, 0 pending, -1 failed (the work is failed then).
  int queryEnd();
  // The abort hook, then the communicator's abort.
  void abortAll();

  std::shared_ptr<Communicator> comm_;
  cudaEvent_t start_;
  cudaEvent_t timedStart_;
  cudaEvent_t end_;
  const bool blockingWait_;
  const std::chrono::steady_clock::time_point deadline_;
  Mutex mutex_;
  std::vector<Tensor> keep_ GUARDED_BY(mutex_);  // released once the op ended
  std::vector<Tensor> outputs_ GUARDED_BY(mutex_);
  WorkHooks hooks_ GUARDED_BY(mutex_);
  bool ending_ GUARDED_BY(mutex_) = false;  // a thread took the outputs to finish the work
};

// Owns a thread that polls the works in flight until each is finished.
class Watchdog {
 public:
  Watchdog();
  ~Watchdog();  // stop() then join
  void add(std::shared_ptr<NcclWork> work);
  // Waits until no work is in flight or `deadline` passes; false on the deadline.
  bool drain(std::chrono::steady_clock::time_point deadline);
  void stop();

 private:
  void run();

  Mutex mutex_;
  CondVar cv_;
  std::deque<std::shared_ptr<NcclWork>> works_ GUARDED_BY(mutex_);
  bool stop_ GUARDED_BY(mutex_) = false;
  std::thread thread_;  // started last, joined by the destructor
};

}  // namespace commhost::nccl_backend
