// SPDX-License-Identifier: Apache-2.0
// The ProcessGroup's collective entry points: validate, then route and issue.
#include "call.h"

namespace commhost {
namespace {

int64_t bytesOf(const std::vector<Tensor>& tensors) {
  int64_t total = 0;
  for (const auto& t : tensors) total += static_cast<int64_t>(t.nbytes());
  return total;
}

}  // namespace

WorkPtr ProcessGroup::allreduce(Tensor& tensor, const AllreduceOptions& opts) {
  Impl::Call call(*impl_, OpType::Allreduce);
  call.checkTensor(tensor, "tensor");
  call.checkReduceOp(opts.reduceOp, tensor.dtype());
  Backend& b = call.issue(tensor.device(), tensor.nbytes(), tensor.dtype(), opts.timeout, &opts.reduceOp);
  const auto shadow = call.shadow(tensor);
  WorkPtr work = call.supervise(b.allreduce(call.context(), tensor, opts), tensor);
  if (!shadow) return work;
  return shadow->run(std::move(work), tensor, [&](Backend& s, const OpContext& ctx, Tensor& out, Tensor&) {
    return s.allreduce(ctx, out, opts);
  });
}

WorkPtr ProcessGroup::allreduceCoalesced(std::vector<Tensor>& tensors, const AllreduceCoalescedOptions& opts) {
  Impl::Call call(*impl_, OpType::AllreduceCoalesced);
  if (tensors.empty()) call.invalid("got no tensors", "pass at least one tensor");
  for (size_t i = 0; i < tensors.size(); ++i)
    call.checkLike(tensors[0], tensors[i], "tensors[" + std::to_string(i) + "]", false);
  call.checkReduceOp(opts.reduceOp, tensors[0].dtype());
  Backend& b = call.issue(tensors[0].device(), bytesOf(tensors), tensors[0].dtype(), opts.timeout, &opts.reduceOp);
  return call.supervise(b.allreduceCoalesced(call.context(), tensors, opts), tensors);
}

WorkPtr ProcessGroup::broadcast(Tensor& tensor, const BroadcastOptions& opts) {
  Impl::Call call(*impl_, OpType::Broadcast);
  call.checkTensor(tensor, "tensor");
  call.checkRoot(opts.root);
  Backend& b = call.issue(tensor.device(), tensor.nbytes(), tensor.dtype(), opts.timeout);
  const auto shadow = call.shadow(tensor);
  WorkPtr work = call.supervise(b.broadcast(call.context(), tensor, opts), tensor);
  if (!shadow) return work;
  return shadow->run(std::move(work), tensor, [&](Backend& s, const OpContext& ctx, Tensor& out, Tensor&) {
    return s.broadcast(ctx, out, opts);
  });
}

WorkPtr ProcessGroup::reduce(Tensor& tensor, const ReduceOptions& opts) {
  Impl::Call call(*impl_, OpType::Reduce);
  call.checkTensor(tensor, "tensor");
  call.checkRoot(opts.root);
  call.checkReduceOp(opts.reduceOp, tensor.dtype());
  Backend& b = call.issue(tensor.device(), tensor.nbytes(), tensor.dtype(), opts.timeout, &opts.reduceOp);
  return call.supervise(b.reduce(call.context(), tensor, opts), tensor);
}

WorkPtr ProcessGroup::allgather(std::vector<Tensor>& outputs, const Tensor& input, const AllgatherOptions& opts) {
  Impl::Call call(*impl_, OpType::Allgather);
  call.checkTensor(input, "input");
  call.checkCount(outputs.size(), impl_->worldSize_, "output tensors");
  for (size_t i = 0; i < outputs.size(); ++i)
    call.checkLike(input, outputs[i], "outputs[" + std::to_string(i) + "]", true);
  Backend& b = call.issue(input.device(), input.nbytes(), input.dtype(), opts.timeout);
  return call.supervise(b.allgather(call.context(), outputs, input, opts), outputs);
}

WorkPtr ProcessGroup::allgatherIntoTensor(Tensor& output, const Tensor& input, const AllgatherOptions& opts) {
  Impl::Call call(*impl_, OpType::AllgatherIntoTensor);
  call.checkTensor(input, "input");
  call.checkLike(input, output, "output", false);
  if (output.numel() != input.numel() * impl_->worldSize_)
    call.invalid("output has " + std::to_string(output.numel()) +
                     " elements, expected group size x input = " + std::to_string(input.numel() * impl_->worldSize_),
                 "allocate the output with size() * input.numel() elements");
  Backend& b = call.issue(input.device(), input.nbytes(), input.dtype(), opts.timeout);
  const auto shadow = call.shadow(input, &output);
  WorkPtr work = call.supervise(b.allgatherIntoTensor(call.context(), output, input, opts), output);
  if (!shadow) return work;
  return shadow->run(std::move(work), output, [&](Backend& s, const OpContext& ctx, Tensor& out, Tensor& in) {
    return s.allgatherIntoTensor(ctx, out, in, opts);
  });
}

WorkPtr ProcessGroup::allgatherCoalesced(std::vector<std::vector<Tensor>>& outputs, const std::vector<Tensor>& inputs,
                                         const AllgatherOptions& opts) {
  Impl::Call call(*impl_, OpType::AllgatherCoalesced);
  if (inputs.empty()) call.invalid("got no input tensors", "pass at least one tensor");
  call.checkCount(outputs.size(), inputs.size(), "output lists (one per input)");
  for (size_t i = 0; i < inputs.size(); ++i) {
    call.checkLike(inputs[0], inputs[i], "inputs[" + std::to_string(i) + "]", false);
    call.checkCount(outputs[i].size(), impl_->worldSize_, "output tensors per input");
    for (size_t r = 0; r < outputs[i].size(); ++r)
      call.checkLike(inputs[i], outputs[i][r], "outputs[" + std::to_string(i) + "][" + std::to_string(r) + "]", true);
  }
  Backend& b = call.issue(inputs[0].device(), bytesOf(inputs), inputs[0].dtype(), opts.timeout);
  return call.supervise(b.allgatherCoalesced(call.context(), outputs, inputs, opts));
}

WorkPtr ProcessGroup::gather(std::vector<Tensor>& outputs, const Tensor& input, const GatherOptions& opts) {
  Impl::Call call(*impl_, OpType::Gather);
  call.checkTensor(input, "input");
  call.checkRoot(opts.root);
  if (impl_->rank_ == opts.root) {
    call.checkCount(outputs.size(), impl_->worldSize_, "output tensors on the root");
    call.agree = Impl::Call::Agree::Nothing;  // the other ranks pass no list
    for (size_t i = 0; i < outputs.size(); ++i)
      call.checkLike(input, outputs[i], "outputs[" + std::to_string(i) + "]", true);
  } else if (!outputs.empty()) {
    call.invalid("outputs must be empty on non-root ranks (root is " + std::to_string(opts.root) + ")",
                 "pass an empty list here");
  }
  Backend& b = call.issue(input.device(), input.nbytes(), input.dtype(), opts.timeout);
  return call.supervise(b.gather(call.context(), outputs, input, opts));
}

WorkPtr ProcessGroup::scatter(Tensor& output, const std::vector<Tensor>& inputs, const ScatterOptions& opts) {
  Impl::Call call(*impl_, OpType::Scatter);
  call.checkTensor(output, "output");
  call.checkRoot(opts.root);
  if (impl_->rank_ == opts.root) {
    call.checkCount(inputs.size(), impl_->worldSize_, "input tensors on the root");
    call.agree = Impl::Call::Agree::Nothing;  // the other ranks pass no list
    for (size_t i = 0; i < inputs.size(); ++i)
      call.checkLike(output, inputs[i], "inputs[" + std::to_string(i) + "]", true);
  } else if (!inputs.empty()) {
    call.invalid("inputs must be empty on non-root ranks (root is " + std::to_string(opts.root) + ")",
                 "pass an empty list here");
  }
  Backend& b = call.issue(output.device(), output.nbytes(), output.dtype(), opts.timeout);
  return call.supervise(b.scatter(call.context(), output, inputs, opts), output);
}

WorkPtr ProcessGroup::reduceScatter(Tensor& output, const std::vector<Tensor>& inputs,
                                    const ReduceScatterOptions& opts) {
  Impl::Call call(*impl_, OpType::ReduceScatter);
  call.checkTensor(output, "output");
  call.checkCount(inputs.size(), impl_->worldSize_, "input tensors");
  for (size_t i = 0; i < inputs.size(); ++i)
    call.checkLike(output, inputs[i], "inputs[" + std::to_string(i) + "]", true);
  call.checkReduceOp(opts.reduceOp, output.dtype());
  Backend& b = call.issue(output.device(), output.nbytes(), output.dtype(), opts.timeout, &opts.reduceOp);
  return call.supervise(b.reduceScatter(call.context(), output, inputs, opts), output);
}

WorkPtr ProcessGroup::reduceScatterTensor(Tensor& output, const Tensor& input, const ReduceScatterOptions& opts) {
  Impl::Call call(*impl_, OpType::ReduceScatterTensor);
  call.checkTensor(output, "output");
  call.checkLike(output, input, "input", false);
  if (input.numel() != output.numel() * impl_->worldSize_)
    call.invalid("input has " + std::to_string(input.numel()) +
                     " elements, expected group size x output = " + std::to_string(output.numel() * impl_->worldSize_),
                 "allocate the input with size() * output.numel() elements");
  call.checkReduceOp(opts.reduceOp, output.dtype());
  Backend& b = call.issue(output.device(), output.nbytes(), output.dtype(), opts.timeout, &opts.reduceOp);
  return call.supervise(b.reduceScatterTensor(call.context(), output, input, opts), output);
}

WorkPtr ProcessGroup::alltoall(std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                               const AlltoallOptions& opts) {
  Impl::Call call(*impl_, OpType::Alltoall);
  call.checkCount(inputs.size(), impl_->worldSize_, "input tensors");
  call.checkCount(outputs.size(), impl_->worldSize_, "output tensors");
  call.agree = Impl::Call::Agree::DtypeOnly;  // each rank sends and receives its own sizes
  for (size_t i = 0; i < inputs.size(); ++i) {
    call.checkLike(inputs[0], inputs[i], "inputs[" + std::to_string(i) + "]", false);
    call.checkLike(inputs[0], outputs[i], "outputs[" + std::to_string(i) + "]", false);
  }
  Backend& b = call.issue(inputs[0].device(), bytesOf(inputs), inputs[0].dtype(), opts.timeout);
  return call.supervise(b.alltoall(call.context(), outputs, inputs, opts), outputs);
}

WorkPtr ProcessGroup::alltoallSingle(Tensor& output, const Tensor& input, const AlltoallSingleOptions& opts) {
  Impl::Call call(*impl_, OpType::AlltoallSingle);
  call.agree = Impl::Call::Agree::DtypeOnly;  // uneven splits differ by rank
  call.checkTensor(input, "input");
  call.checkLike(input, output, "output", false);
  // Resolve splits so the backend always gets one entry per rank.
  AlltoallSingleOptions resolved = opts;
  auto resolve = [&](std::vector<int64_t>& splits, const Tensor& t, const char* which) {
    const int64_t rows = t.shape().ndim() ? t.shape()[0] : 1;
    if (splits.empty()) {
      if (rows % impl_->worldSize_ != 0)
        call.invalid(std::string(which) + " has " + std::to_string(rows) + " rows, not divisible by the group size " +
                         std::to_string(impl_->worldSize_),
                     std::string("pass ") + which + " split sizes");
      splits.assign(impl_->worldSize_, rows / impl_->worldSize_);
      return;
    }
    call.checkCount(splits.size(), impl_->worldSize_, (std::string(which) + " split sizes").c_str());
    int64_t sum = 0;
    for (int64_t s : splits) {
      if (s < 0) call.invalid(std::string(which) + " split sizes contain a negative entry", "use sizes >= 0");
      sum += s;
    }
    if (sum != rows)
      call.invalid(std::string(which) + " split sizes add up to " + std::to_string(sum) + " rows but the tensor has " +
                       std::to_string(rows),
                   "make the splits sum to dimension 0");
  };
  resolve(resolved.inputSplitSizes, input, "input");
  resolve(resolved.outputSplitSizes, output, "output");
  Backend& b = call.issue(input.device(), input.nbytes(), input.dtype(), opts.timeout);
  return call.supervise(b.alltoallSingle(call.context(), output, input, resolved), output);
}

WorkPtr ProcessGroup::barrier(const BarrierOptions& opts) {
  Impl::Call call(*impl_, OpType::Barrier);
  Device device = Device::cpu();
  if (!call.st.routes.servesDevice(DeviceType::CPU)) device = Device::cuda(0);
  Backend& b = call.issue(device, 0, std::nullopt, opts.timeout);
  return call.supervise(b.barrier(call.context(), opts));
}

WorkPtr ProcessGroup::send(const Tensor& tensor, int dst, const SendOptions& opts) {
  Impl::Call call(*impl_, OpType::Send);
  call.checkTensor(tensor, "tensor");
  call.checkPeer(dst, "destination");
  Backend& b = call.issue(tensor.device(), tensor.nbytes(), tensor.dtype(), opts.timeout);
  return call.supervise(b.send(call.context(), tensor, dst, opts));
}

WorkPtr ProcessGroup::recv(Tensor& tensor, int src, const RecvOptions& opts) {
  Impl::Call call(*impl_, OpType::Recv);
  call.checkTensor(tensor, "tensor");
  call.checkPeer(src, "source");
  Backend& b = call.issue(tensor.device(), tensor.nbytes(), tensor.dtype(), opts.timeout);
  return call.supervise(b.recv(call.context(), tensor, src, opts), tensor);
}

WorkPtr ProcessGroup::recvAnySource(Tensor& tensor, const RecvOptions& opts) {
  Impl::Call call(*impl_, OpType::RecvAnySource);
  call.checkTensor(tensor, "tensor");
  if (impl_->worldSize_ < 2) call.invalid("a group of one has no peer to receive from", "receive in a larger group");
  Backend& b = call.issue(tensor.device(), tensor.nbytes(), tensor.dtype(), opts.timeout);
  return call.supervise(b.recvAnySource(call.context(), tensor, opts), tensor);
}

}  // namespace commhost
