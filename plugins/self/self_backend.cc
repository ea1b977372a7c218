// SPDX-License-Identifier: Apache-2.0
#include "self_backend.h"

#include <cstring>

#include "commhost/errors.h"
#include "commhost/kernels/reduce.h"
#include "commhost/sdk/work_queue.h"

namespace commhost::self {

namespace {

// With one rank, every reduction is the identity except the final scale of Avg and PreMulSum.
void applyReduce(Tensor& t, const ReduceOp& op) {
  kernels::scaleBuffer(t.data(), t.numel(), t.dtype(), kernels::finalScale(op, 1));
}

void copy(const Tensor& from, Tensor& to) {
  if (from.data() != to.data()) std::memcpy(to.data(), from.data(), from.nbytes());
}

WorkPtr done(const OpContext& ctx, std::vector<Tensor> outputs) {
  return std::make_shared<CompletedWork>(ctx, std::move(outputs));
}

// One output: one copy of the tensor, held by the work itself (completedWork: no vector).
WorkPtr done(const OpContext& ctx, const Tensor& output) { return completedWork(ctx, output); }

}  // namespace

std::unique_ptr<Backend> create(const OptionValues&, const BackendContext& ctx) {
  if (ctx.worldSize != 1)
    throw ConfigError("backend '" + ctx.backendName +
                      "' uses the self plugin, which serves groups of one rank, but group " + ctx.groupName + " has " +
                      std::to_string(ctx.worldSize) +
                      " ranks; route multi-rank groups to a networked backend (e.g. gloo)");
  return std::make_unique<SelfBackend>();
}

WorkPtr SelfBackend::allreduce(const OpContext& ctx, Tensor& tensor, const AllreduceOptions& opts) {
  applyReduce(tensor, opts.reduceOp);
  return done(ctx, tensor);
}

WorkPtr SelfBackend::allreduceCoalesced(const OpContext& ctx, std::vector<Tensor>& tensors,
                                        const AllreduceCoalescedOptions& opts) {
  for (auto& t : tensors) applyReduce(t, opts.reduceOp);
  return done(ctx, tensors);
}

WorkPtr SelfBackend::broadcast(const OpContext& ctx, Tensor& tensor, const BroadcastOptions&) {
  return done(ctx, tensor);
}

WorkPtr SelfBackend::reduce(const OpContext& ctx, Tensor& tensor, const ReduceOptions& opts) {
  applyReduce(tensor, opts.reduceOp);
  return done(ctx, tensor);
}

WorkPtr SelfBackend::allgather(const OpContext& ctx, std::vector<Tensor>& outputs, const Tensor& input,
                               const AllgatherOptions&) {
  copy(input, outputs[0]);
  return done(ctx, outputs);
}

WorkPtr SelfBackend::allgatherIntoTensor(const OpContext& ctx, Tensor& output, const Tensor& input,
                                         const AllgatherOptions&) {
  copy(input, output);
  return done(ctx, output);
}

WorkPtr SelfBackend::allgatherCoalesced(const OpContext& ctx, std::vector<std::vector<Tensor>>& outputs,
                                        const std::vector<Tensor>& inputs, const AllgatherOptions&) {
  std::vector<Tensor> flat;
  for (size_t i = 0; i < inputs.size(); ++i) {
    copy(inputs[i], outputs[i][0]);
    flat.push_back(outputs[i][0]);
  }
  return done(ctx, flat);
}

WorkPtr SelfBackend::gather(const OpContext& ctx, std::vector<Tensor>& outputs, const Tensor& input,
                            const GatherOptions&) {
  copy(input, outputs[0]);
  return done(ctx, outputs);
}

WorkPtr SelfBackend::scatter(const OpContext& ctx, Tensor& output, const std::vector<Tensor>& inputs,
                             const ScatterOptions&) {
  copy(inputs[0], output);
  return done(ctx, output);
}

WorkPtr SelfBackend::reduceScatter(const OpContext& ctx, Tensor& output, const std::vector<Tensor>& inputs,
                                   const ReduceScatterOptions& opts) {
  copy(inputs[0], output);
  applyReduce(output, opts.reduceOp);
  return done(ctx, output);
}

WorkPtr SelfBackend::reduceScatterTensor(const OpContext& ctx, Tensor& output, const Tensor& input,
                                         const ReduceScatterOptions& opts) {
  copy(input, output);
  applyReduce(output, opts.reduceOp);
  return done(ctx, output);
}

WorkPtr SelfBackend::alltoall(const OpContext& ctx, std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                              const AlltoallOptions&) {
  if (outputs[0].nbytes() != inputs[0].nbytes())
    raise(ErrorCode::InvalidArgument, ErrorContext::of(ctx),
          "output " + outputs[0].str() + " and input " + inputs[0].str() + " differ in size",
          "With one rank they must match");
  copy(inputs[0], outputs[0]);
  return done(ctx, outputs);
}

WorkPtr SelfBackend::alltoallSingle(const OpContext& ctx, Tensor& output, const Tensor& input,
                                    const AlltoallSingleOptions&) {
  if (output.nbytes() != input.nbytes())
    raise(ErrorCode::InvalidArgument, ErrorContext::of(ctx),
          "output " + output.str() + " and input " + input.str() + " differ in size", "With one rank they must match");
  copy(input, output);
  return done(ctx, output);
}

WorkPtr SelfBackend::barrier(const OpContext& ctx, const BarrierOptions&) { return done(ctx, std::vector<Tensor>{}); }

// The ProcessGroup refuses p2p in a group of one (the only peer would be this rank), so
// these are reached only by direct Backend calls.
WorkPtr SelfBackend::send(const OpContext& ctx, const Tensor&, int dst, const SendOptions&) {
  raise(ErrorCode::InvalidArgument, ErrorContext::of(ctx, dst), "the self backend has no peers",
        "Send only in groups of more than one rank");
}
WorkPtr SelfBackend::recv(const OpContext& ctx, Tensor&, int src, const RecvOptions&) {
  raise(ErrorCode::InvalidArgument, ErrorContext::of(ctx, src), "the self backend has no peers",
        "Receive only in groups of more than one rank");
}
WorkPtr SelfBackend::recvAnySource(const OpContext& ctx, Tensor&, const RecvOptions&) {
  raise(ErrorCode::InvalidArgument, ErrorContext::of(ctx), "the self backend has no peers",
        "Receive only in groups of more than one rank");
}

}  // namespace commhost::self
