// SPDX-License-Identifier: Apache-2.0
// Backend: the interface a backend plugin implements, one virtual per operation.
//
// Contract:
// - The ProcessGroup has validated every argument (devices, dtypes, sizes, roots, peers)
//   against the group and the backend's Capabilities before calling; a backend does not
//   repeat those checks.
// - Every call returns at once with a Work; the work runs on the backend's own threads
//   (or completes inline). Calls come from one thread per group, in seq order, the same
//   order on every rank.
// - Tensors passed in stay valid until the work completes (the caller keeps them alive).
// - abort() fails every work in flight with AbortedError and makes later calls throw;
//   shutdown() waits for works in flight, then releases resources. Both may be called
//   from any thread, and more than once.
// - Errors are thrown (or set on the work) as commhost::Error subclasses, built with
//   raise(code, ErrorContext::of(ctx), what, hint): the host fills group, rank, op and seq
//   in every OpContext. A PeerLostError whose ErrorContext names the peer ("(peer N)",
//   Error::where().peer) tells the supervisor that peer is gone: name it only when the
//   backend knows (e.g. its process exited).
// - An op run inline (inside the call) may wait for peers; if the supervisor finds a
//   peer lost meanwhile, it calls abort() from its own thread to end that wait.
#pragma once

#include <string>
#include <vector>

#include "commhost/capabilities.h"
#include "commhost/export.h"
#include "commhost/options.h"
#include "commhost/tensor.h"
#include "commhost/work.h"

namespace commhost {

class COMMHOST_API Backend {
 public:
  virtual ~Backend() = default;
  virtual const Capabilities& capabilities() const = 0;

  virtual WorkPtr allreduce(const OpContext& ctx, Tensor& tensor, const AllreduceOptions& opts) = 0;
  virtual WorkPtr allreduceCoalesced(const OpContext& ctx, std::vector<Tensor>& tensors,
                                     const AllreduceCoalescedOptions& opts) = 0;
  virtual WorkPtr broadcast(const OpContext& ctx, Tensor& tensor, const BroadcastOptions& opts) = 0;
  virtual WorkPtr reduce(const OpContext& ctx, Tensor& tensor, const ReduceOptions& opts) = 0;
  // outputs has one tensor per rank.
  virtual WorkPtr allgather(const OpContext& ctx, std::vector<Tensor>& outputs, const Tensor& input,
                            const AllgatherOptions& opts) = 0;
  // output holds world_size * input.numel() elements, rank-major.
  virtual WorkPtr allgatherIntoTensor(const OpContext& ctx, Tensor& output, const Tensor& input,
                                      const AllgatherOptions& opts) = 0;
  // outputs[i] has one tensor per rank for inputs[i].
  virtual WorkPtr allgatherCoalesced(const OpContext& ctx, std::vector<std::vector<Tensor>>& outputs,
                                     const std::vector<Tensor>& inputs, const AllgatherOptions& opts) = 0;
  // outputs: one per rank on the root, empty elsewhere.
  virtual WorkPtr gather(const OpContext& ctx, std::vector<Tensor>& outputs, const Tensor& input,
                         const GatherOptions& opts) = 0;
  // inputs: one per rank on the root, empty elsewhere.
  virtual WorkPtr scatter(const OpContext& ctx, Tensor& output, const std::vector<Tensor>& inputs,
                          const ScatterOptions& opts) = 0;
  // inputs: one per rank; rank r receives the reduction of every rank's inputs[r].
  virtual WorkPtr reduceScatter(const OpContext& ctx, Tensor& output, const std::vector<Tensor>& inputs,
                                const ReduceScatterOptions& opts) = 0;
  // input holds world_size * output.numel() elements.
  virtual WorkPtr reduceScatterTensor(const OpContext& ctx, Tensor& output, const Tensor& input,
                                      const ReduceScatterOptions& opts) = 0;
  virtual WorkPtr alltoall(const OpContext& ctx, std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                           const AlltoallOptions& opts) = 0;
  // Split sizes are already resolved: one entry per rank, in rows of dimension 0.
  virtual WorkPtr alltoallSingle(const OpContext& ctx, Tensor& output, const Tensor& input,
                                 const AlltoallSingleOptions& opts) = 0;
  virtual WorkPtr barrier(const OpContext& ctx, const BarrierOptions& opts) = 0;
  virtual WorkPtr send(const OpContext& ctx, const Tensor& tensor, int dst, const SendOptions& opts) = 0;
  virtual WorkPtr recv(const OpContext& ctx, Tensor& tensor, int src, const RecvOptions& opts) = 0;
  virtual WorkPtr recvAnySource(const OpContext& ctx, Tensor& tensor, const RecvOptions& opts) = 0;

  virtual void abort(const std::string& reason) = 0;
  virtual void shutdown() = 0;
};

}  // namespace commhost
