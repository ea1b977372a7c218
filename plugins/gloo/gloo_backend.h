// SPDX-License-Identifier: Apache-2.0
// The gloo backend: every collective on CPU over Gloo's TCP transport (the role of
// c10d's ProcessGroupGloo). Ops are queued to worker threads and run on one of several
// Gloo contexts chosen by seq, so independent collectives overlap; a collective up to
// inline_max runs on the caller instead when nothing is queued or running (as shm's).
//
// Threading: calls come from the group's thread, one at a time in seq order (which the
// WorkQueue's inline path needs); ops run on the WorkQueue's workers
// (commhost/sdk/work_queue.h) or, inline, on that thread.
// contexts_ is fixed after construction. Tensors must stay alive until works finish.
#pragma once

#include <atomic>
#include <functional>
#include <map>

#include "abortable.h"
#include "algorithms.h"
#include "commhost/sdk/plugin.h"
#include "commhost/sdk/typed_options.h"
#include "commhost/sdk/work_queue.h"
#include "placement.h"

namespace commhost::gloo_backend {

const Capabilities& capabilities();

// The plugin options (schema in backend.cc).
struct Options {
  int threads = 1;
  int contexts = 2;
  std::string device;
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::Auto;
  int64_t ringThreshold = 0;
  int workerSpinUs = -1;
  int64_t inlineMax = 0;
  ThreadPlacement placement = ThreadPlacement::Auto;
  std::chrono::milliseconds timeout{0};
  static OptionSchema<Options> schema();
  // Where the config is loaded (config check, commhost run, each rank): the device is an
  // interface, an address or a name of this host (rendezvous.h deviceProblem).
  std::string checkHere() const;
};
std::unique_ptr<Backend> create(const Options& options, const BackendContext& ctx);

class GlooBackend final : public Backend {
 public:
  GlooBackend(const Options& options, const BackendContext& ctx);
  ~GlooBackend() override;
  const Capabilities& capabilities() const override { return gloo_backend::capabilities(); }

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
  Call callFor(const OpContext& op) const;
  void closeConnections() noexcept;  // every pair of every context, hard (RST)
  // Shuts this backend's connections down, so that the peers see them drop (see
  // backend.cc); `what` ends the log line.
  void interruptConnections(const char* what) noexcept;
  // A collective of `bytes` (what inline_max is compared with) on the collectives' queue.
  // Gloo's collectives wait for their peers as long as the contexts' timeout, whatever
  // the op's own: an op with a shorter deadline (a hier step) is queued, so that its
  // caller's wait can give up on time.
  // One run on the caller counts itself in callersInGloo_, so that abort() can end it
  // (idle() is exact for the one submitting thread: the queue then runs it inline).
  template <class F> WorkPtr submit(const OpContext& op, size_t bytes, F&& job) {
    noteIssued(op);
    const bool onCaller = callerRunsAll_ || (bytes <= inlineMax_ && op.timeout >= contextTimeout_ && queue_->idle());
    if (!onCaller) return queue_->submit(op, std::forward<F>(job));
    return queue_->submit(
        op,
        // Runs inside this call (the queue is idle, and this is its one submitting thread),
        // so `op` is still alive.
        [this, &op, job = std::forward<F>(job)]() mutable {
          CallerInGloo counted(callersInGloo_);
          // abort() sets aborted_ then reads callersInGloo_; this counts then reads
          // aborted_ (both seq_cst): one of the two sees the other.
          if (aborted_.load()) throwAborted(op);
          auto outputs = job();
          // A Gloo wait that abort() ended may have let the algorithm run on to the end
          // over data that never came: such an op fails, whatever it returned.
          if (aborted_.load()) throwAborted(op);
          return outputs;
        },
        true);
  }
  struct CallerInGloo {
    explicit CallerInGloo(std::atomic<int>& n) : n_(n) { n_.fetch_add(1); }
    ~CallerInGloo() { n_.fetch_sub(1); }
    std::atomic<int>& n_;
  };
  [[noreturn]] void throwAborted(const OpContext& op) const;
  std::string abortReason() const;  // the first abort()'s
  // Point-to-point waits run on their own thread: a receive waiting for a send the peer
  // issues after a collective must not hold the collectives' worker (or, with threads: 0,
  // the caller) hostage.
  WorkPtr submitP2P(const OpContext& op, WorkQueue::Job job, std::shared_ptr<AsyncWork> work = nullptr) {
    noteIssued(op);
    return p2pQueue_->submit(op, std::move(job), false, std::move(work));
  }
  // Runs `post` (Gloo calls on the caller's thread); nullptr, or a work failed with
  // the described error when Gloo threw.
  WorkPtr postP2P(const OpContext& op, const std::function<void()>& post) const;
  // The error a Gloo exception of `op` (which started running at `started`, on the
  // caller's thread when `onCaller`) fails with.
  std::exception_ptr describe(const OpContext& op, const std::exception_ptr& error,
                              std::chrono::steady_clock::time_point started, bool onCaller) const;
  // The rank whose end of a connection Gloo's message names ("[addr]:port"), or -1.
  int peerNamedIn(const std::string& what) const;
  // Two relaxed stores per op: what the fatal-error hint names if Gloo's own thread
  // aborts the process (see fatal.h).
  void noteIssued(const OpContext& op) {
    lastOp_.store(static_cast<int>(op.op), std::memory_order_relaxed);
    lastSeq_.store(op.seq, std::memory_order_relaxed);
  }

 public:
  // One line for the fatal-error hint: group, rank and the last op issued.
  std::string inFlight() const;

 private:
  BackendContext ctx_;
  AllreduceAlgorithm algorithm_;
  int64_t ringThreshold_;
  size_t inlineMax_;    // a collective up to this many bytes runs on the caller when the queue is idle
  bool callerRunsAll_;  // threads: 0
  std::chrono::milliseconds contextTimeout_{0};             // every context's: Gloo's collectives wait this long
  std::vector<std::shared_ptr<::gloo::Context>> contexts_;  // collectives use contexts_[seq % size]
  std::shared_ptr<::gloo::Context> p2p_;                    // send/recv, so pairs keep their order
  std::unique_ptr<WorkQueue> queue_;
  std::unique_ptr<WorkQueue> p2pQueue_;       // one thread: send/recv completion waits
  std::map<std::string, int> peerByAddress_;  // every connection endpoint of every peer
  // Shared with the ops' calls: a queue left behind after an abort may still retire.
  std::shared_ptr<Retired> retired_ = std::make_shared<Retired>();
  // Collectives running inside Gloo on their callers' threads (inline_max, threads: 0):
  // abort() also shuts the connections down when one runs, so that the peers see them drop.
  std::atomic<int> callersInGloo_{0};
  // Every Gloo buffer of this backend's ops, so that abort() ends their waits.
  std::shared_ptr<AbortRegistry> abortRegistry_ = std::make_shared<AbortRegistry>();
  std::atomic<bool> aborted_{false};
  mutable Mutex abortMutex_;
  std::string abortReason_ GUARDED_BY(abortMutex_);  // the first abort()'s
  std::atomic<int> lastOp_{-1};
  std::atomic<uint64_t> lastSeq_{0};
};

}  // namespace commhost::gloo_backend
