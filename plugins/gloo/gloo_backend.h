// The gloo backend: every collective on CPU over Gloo's TCP transport (the role of
// c10d's ProcessGroupGloo). Ops are queued to worker threads and run on one of several
// Gloo contexts chosen by seq, so independent collectives overlap.
//
// Threading: calls come from the group's thread; ops run on the WorkQueue's workers.
// contexts_ is fixed after construction. Tensors must stay alive until works finish.
#pragma once

#include "algorithms.h"
#include "commhost/plugin.h"
#include "work_queue.h"

namespace commhost::gloo_backend {

const Capabilities& capabilities();
const std::vector<OptionSpec>& optionSpecs();
std::unique_ptr<Backend> create(const OptionValues& options, const BackendContext& ctx);

class GlooBackend final : public Backend {
 public:
  GlooBackend(const OptionValues& options, const BackendContext& ctx);
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
  WorkPtr submit(const OpContext& op, WorkQueue::Job job) { return queue_->enqueue(op, std::move(job)); }
  // Point-to-point waits run on their own thread: a receive waiting for a send the peer
  // issues after a collective must not hold the collectives' worker (or, with threads: 0,
  // the caller) hostage.
  WorkPtr submitP2P(const OpContext& op, WorkQueue::Job job, std::shared_ptr<AsyncWork> work = nullptr) {
    return p2pQueue_->enqueue(op, std::move(job), std::move(work));
  }
  std::exception_ptr describe(const OpContext& op, std::exception_ptr error) const;

  BackendContext ctx_;
  AllreduceAlgorithm algorithm_;
  int64_t ringThreshold_;
  std::vector<std::shared_ptr<::gloo::Context>> contexts_;  // collectives use contexts_[seq % size]
  std::shared_ptr<::gloo::Context> p2p_;                    // send/recv, so pairs keep their order
  std::unique_ptr<WorkQueue> queue_;
  std::unique_ptr<WorkQueue> p2pQueue_;  // one thread: send/recv completion waits
};

}  // namespace commhost::gloo_backend
