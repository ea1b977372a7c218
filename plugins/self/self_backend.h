// SPDX-License-Identifier: Apache-2.0
// The `self` backend: a group of one rank. Every op completes inside the call, so it
// measures exactly what the host adds to a collective.
#pragma once

#include "commhost/sdk/backend.h"
#include "commhost/sdk/plugin.h"

namespace commhost::self {

inline constexpr Capabilities kCapabilities = {
    Capabilities::allOps(), Capabilities::allDTypes(), Capabilities::allReduceOps(),
    {DeviceType::CPU},      {Feature::Split},
};

class SelfBackend final : public Backend {
 public:
  const Capabilities& capabilities() const override { return kCapabilities; }

  WorkPtr allreduce(const OpContext& ctx, Tensor& tensor, const AllreduceOptions& opts) override;
  WorkPtr allreduceCoalesced(const OpContext& ctx, std::vector<Tensor>& tensors,
                             const AllreduceCoalescedOptions& opts) override;
  WorkPtr broadcast(const OpContext& ctx, Tensor& tensor, const BroadcastOptions& opts) override;
  WorkPtr reduce(const OpContext& ctx, Tensor& tensor, const ReduceOptions& opts) override;
  WorkPtr allgather(const OpContext& ctx, std::vector<Tensor>& outputs, const Tensor& input,
                    const AllgatherOptions& opts) override;
  WorkPtr allgatherIntoTensor(const OpContext& ctx, Tensor& output, const Tensor& input,
                              const AllgatherOptions& opts) override;
  WorkPtr allgatherCoalesced(const OpContext& ctx, std::vector<std::vector<Tensor>>& outputs,
                             const std::vector<Tensor>& inputs, const AllgatherOptions& opts) override;
  WorkPtr gather(const OpContext& ctx, std::vector<Tensor>& outputs, const Tensor& input,
                 const GatherOptions& opts) override;
  WorkPtr scatter(const OpContext& ctx, Tensor& output, const std::vector<Tensor>& inputs,
                  const ScatterOptions& opts) override;
  WorkPtr reduceScatter(const OpContext& ctx, Tensor& output, const std::vector<Tensor>& inputs,
                        const ReduceScatterOptions& opts) override;
  WorkPtr reduceScatterTensor(const OpContext& ctx, Tensor& output, const Tensor& input,
                              const ReduceScatterOptions& opts) override;
  WorkPtr alltoall(const OpContext& ctx, std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                   const AlltoallOptions& opts) override;
  WorkPtr alltoallSingle(const OpContext& ctx, Tensor& output, const Tensor& input,
                         const AlltoallSingleOptions& opts) override;
  WorkPtr barrier(const OpContext& ctx, const BarrierOptions& opts) override;
  WorkPtr send(const OpContext& ctx, const Tensor& tensor, int dst, const SendOptions& opts) override;
  WorkPtr recv(const OpContext& ctx, Tensor& tensor, int src, const RecvOptions& opts) override;
  WorkPtr recvAnySource(const OpContext& ctx, Tensor& tensor, const RecvOptions& opts) override;

  void abort(const std::string&) override {}
  void shutdown() override {}
};

std::unique_ptr<Backend> create(const OptionValues& options, const BackendContext& ctx);

}  // namespace commhost::self
