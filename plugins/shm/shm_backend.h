// SPDX-License-Identifier: Apache-2.0
// The shm backend: CPU collectives between the ranks of one host through one POSIX
// shared-memory segment per group (the CPU counterpart of intra_node_comm's one-shot /
// two-shot allreduce). Ops it lacks (point-to-point, gather/scatter lists of lists) are
// absent from its manifest, so routes send them to another backend.
//
// Threading: calls come from the group's thread in seq order. The SDK WorkQueue
// (commhost/sdk/work_queue.h) runs each op one at a time, in seq order: an op up to
// inline_max on the caller's thread when nothing is queued or running (the < 1 us path:
// no hand-off, no wake-up), else on the queue's one worker thread; so the Channel (and
// the segment steps it owns) is used by one thread at a time. abort() and shutdown() may
// be called from any thread. Members are fixed after construction except the queue and
// the AbortFlag, which guard their own state, and the broken state (below).
//
// After an op fails with anything but InvalidArgument (a timeout, a lost peer, an
// abort), the ranks' step counters no longer agree, so every later op fails at once with
// that first error named: the group must be rebuilt.
#pragma once

#include <atomic>

#include "algorithms.h"
#include "channel.h"
#include "commhost/mutex.h"
#include "commhost/sdk/plugin.h"
#include "commhost/sdk/typed_options.h"
#include "commhost/sdk/work_queue.h"

namespace commhost::shm {

const Capabilities& capabilities();

// The plugin options, as the user wrote them (see the schema in backend.cc).
struct Options {
  int64_t chunk = 0;
  int depth = 0;
  size_t oneShotMax = 0;
  size_t inlineMax = 0;
  int64_t spinUs = -1;  // -1: chosen by whether ranks outnumber CPUs
  int64_t yieldUs = -1;
  std::chrono::milliseconds timeout{0};
  static OptionSchema<Options> schema();
  // Every rank's block of a chunk is at least a cache line.
  void validate(const BackendContext& ctx) const;
};
std::unique_ptr<Backend> create(const Options& options, const BackendContext& ctx);

// The plugin options, resolved.
struct Settings {
  SegmentLayout layout;
  size_t oneShotMax = 0;  // allreduce bytes up to which one-shot is used (two-shot above)
  size_t inlineMax = 0;   // op bytes up to which an idle backend runs the op on the caller
  std::chrono::microseconds spin{0};
  std::chrono::microseconds yield{0};
  std::chrono::milliseconds timeout{0};  // rendezvous
};

class ShmBackend final : public Backend {
 public:
  ShmBackend(const Settings& settings, const BackendContext& ctx);
  ~ShmBackend() override;
  const Capabilities& capabilities() const override { return shm::capabilities(); }

  WorkPtr allreduce(const OpContext& op, Tensor& tensor, const AllreduceOptions& opts) override;
  WorkPtr allreduceCoalesced(const OpContext& op, std::vector<Tensor>& tensors,
                             const AllreduceCoalescedOptions& opts) override;
  WorkPtr broadcast(const OpContext& op, Tensor& tensor, const BroadcastOptions& opts) override;
  WorkPtr reduce(const OpContext& op, Tensor& tensor, const ReduceOptions& opts) override;
  WorkPtr allgather(const OpContext& op, std::vector<Tensor>& outputs, const Tensor& input,
                    const AllgatherOptions& opts) override;
  WorkPtr allgatherIntoTensor(const OpContext& op, Tensor& output, const Tensor& input,
                              const AllgatherOptions& opts) override;
  WorkPtr allgatherCoalesced(const OpContext& op, std::vector<std::vector<Tensor>>& outputs,
                             const std::vector<Tensor>& inputs, const AllgatherOptions& opts) override;
  WorkPtr gather(const OpContext& op, std::vector<Tensor>& outputs, const Tensor& input,
                 const GatherOptions& opts) override;
  WorkPtr scatter(const OpContext& op, Tensor& output, const std::vector<Tensor>& inputs,
                  const ScatterOptions& opts) override;
  WorkPtr reduceScatter(const OpContext& op, Tensor& output, const std::vector<Tensor>& inputs,
                        const ReduceScatterOptions& opts) override;
  WorkPtr reduceScatterTensor(const OpContext& op, Tensor& output, const Tensor& input,
                              const ReduceScatterOptions& opts) override;
  WorkPtr alltoall(const OpContext& op, std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                   const AlltoallOptions& opts) override;
  WorkPtr alltoallSingle(const OpContext& op, Tensor& output, const Tensor& input,
                         const AlltoallSingleOptions& opts) override;
  WorkPtr barrier(const OpContext& op, const BarrierOptions& opts) override;
  WorkPtr send(const OpContext& op, const Tensor& tensor, int dst, const SendOptions& opts) override;
  WorkPtr recv(const OpContext& op, Tensor& tensor, int src, const RecvOptions& opts) override;
  WorkPtr recvAnySource(const OpContext& op, Tensor& tensor, const RecvOptions& opts) override;

  void abort(const std::string& reason) override;
  void shutdown() override;

 private:
  bool small(size_t bytes) const { return bytes <= settings_.inlineMax; }
  // Runs job() (returning the op's outputs) inline when `small` and the backend is idle,
  // else on the worker. Throws AbortedError / BackendError when the backend is aborted or
  // broken; the op's own failures go to its Work.
  template <class F> WorkPtr run(const OpContext& op, bool small, F&& job) {
    checkUsable(op);
    return queue_->submit(op, std::forward<F>(job), small);
  }
  // Inline: twice on every op's path (run() and the queue's beforeEach); the throwing
  // part is out of line.
  void checkUsable(const OpContext& op) {
    if (abort_.isSet() || broken_.load(std::memory_order_acquire)) refuse(op);
  }
  [[noreturn]] void refuse(const OpContext& op);
  // Describes the error of a failed op (rank, op, seq) and marks the backend broken.
  std::exception_ptr failed(const OpContext& op, std::exception_ptr error);

  BackendContext ctx_;
  Settings settings_;
  AbortFlag abort_;
  std::unique_ptr<Segment> segment_;
  std::unique_ptr<Channel> channel_;  // used only by the thread the queue lets run
  std::atomic<bool> broken_{false};   // set once (release), then read (acquire)
  Mutex brokenMutex_;
  std::string brokenReason_ GUARDED_BY(brokenMutex_);
  std::unique_ptr<WorkQueue> queue_;  // destroyed first: drains and joins before the channel goes
};

}  // namespace commhost::shm
