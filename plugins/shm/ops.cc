// SPDX-License-Identifier: Apache-2.0
// Each op of the shm backend: map tensors to raw buffers and run the algorithm through
// the work queue (run()). Jobs capture tensors by value, keeping them alive while queued,
// and return them as their output (submit() makes it a completedWork: no refcount traffic
// and no vector on the small-op path). Ops outside the manifest are never routed here;
// they throw if called directly.
#include <numeric>

#include "commhost/errors.h"
#include "commhost/sdk/backend_sdk.h"
#include "shm_backend.h"

namespace commhost::shm {
namespace {

size_t count(const Tensor& t) { return static_cast<size_t>(t.numel()); }
int64_t rowBytes(const Tensor& t) {
  return t.shape().ndim() && t.shape()[0] ? static_cast<int64_t>(t.nbytes()) / t.shape()[0] : 0;
}

// What every rank must pass alike (see Channel::expect); root-only lists and alltoall
// splits are not in it.
Signature agree(size_t bytes, DType dtype, int reduceKind = -1, int root = -1) {
  Signature s;
  s.bytes = bytes;
  s.dtype = static_cast<uint8_t>(dtype);
  s.reduceOp = reduceKind < 0 ? 0xff : static_cast<uint8_t>(reduceKind);
  s.root = root;
  return s;
}

[[noreturn]] void unsupported(const OpContext& op) {
  raise(ErrorCode::InvalidArgument, ErrorContext::of(op),
        "the shm backend does not implement this op (it is not in its manifest)",
        "Route it to another backend, e.g. { op: " + std::string(opName(op.op)) + ", backend: gloo }.");
}

}  // namespace

WorkPtr ShmBackend::allreduce(const OpContext& op, Tensor& tensor, const AllreduceOptions& opts) {
  const bool oneShot = tensor.nbytes() <= settings_.oneShotMax;
  return run(op, small(tensor.nbytes()), [this, t = tensor, r = opts.reduceOp, oneShot]() mutable {
    channel_->expect(agree(t.nbytes(), t.dtype(), r.kind));
    if (oneShot) allreduceOneShot(*channel_, t.data(), count(t), t.dtype(), r);
    else allreduceTwoShot(*channel_, t.data(), count(t), t.dtype(), r);
    return std::move(t);
  });
}

WorkPtr ShmBackend::allreduceCoalesced(const OpContext& op, std::vector<Tensor>& tensors,
                                       const AllreduceCoalescedOptions& opts) {
  return run(op, small(totalBytes(tensors)), [this, ts = tensors, r = opts.reduceOp]() mutable {
    for (const auto& t : ts) {  // same tensors on every rank: the steps stay in lockstep
      channel_->expect(agree(t.nbytes(), t.dtype(), r.kind));
      if (t.nbytes() <= settings_.oneShotMax) allreduceOneShot(*channel_, t.data(), count(t), t.dtype(), r);
      else allreduceTwoShot(*channel_, t.data(), count(t), t.dtype(), r);
    }
    return std::move(ts);
  });
}

WorkPtr ShmBackend::broadcast(const OpContext& op, Tensor& tensor, const BroadcastOptions& opts) {
  return run(op, small(tensor.nbytes()), [this, t = tensor, root = opts.root]() mutable {
    channel_->expect(agree(t.nbytes(), t.dtype(), -1, root));
    shm::broadcast(*channel_, t.data(), t.nbytes(), root);
    return std::move(t);
  });
}

WorkPtr ShmBackend::reduce(const OpContext& op, Tensor& tensor, const ReduceOptions& opts) {
  return run(op, small(tensor.nbytes()), [this, t = tensor, r = opts.reduceOp, root = opts.root]() mutable {
    channel_->expect(agree(t.nbytes(), t.dtype(), r.kind, root));
    shm::reduce(*channel_, t.data(), count(t), t.dtype(), r, root);
    return std::move(t);
  });
}

WorkPtr ShmBackend::allgather(const OpContext& op, std::vector<Tensor>& outputs, const Tensor& input,
                              const AllgatherOptions&) {
  return run(op, small(input.nbytes() * outputs.size()), [this, outs = outputs, in = input]() mutable {
    std::vector<void*> ptrs;
    for (const auto& t : outs) ptrs.push_back(t.data());
    channel_->expect(agree(in.nbytes(), in.dtype()));
    shm::gather(*channel_, in.data(), in.nbytes(), ptrs.data(), -1);
    return std::move(outs);
  });
}

WorkPtr ShmBackend::allgatherIntoTensor(const OpContext& op, Tensor& output, const Tensor& input,
                                        const AllgatherOptions&) {
  return run(op, small(output.nbytes()), [this, out = output, in = input]() mutable {
    std::vector<void*> ptrs;
    for (int r = 0; r < ctx_.worldSize; ++r) ptrs.push_back(static_cast<uint8_t*>(out.data()) + r * in.nbytes());
    channel_->expect(agree(in.nbytes(), in.dtype()));
    shm::gather(*channel_, in.data(), in.nbytes(), ptrs.data(), -1);
    return std::move(out);
  });
}

WorkPtr ShmBackend::allgatherCoalesced(const OpContext& op, std::vector<std::vector<Tensor>>&,
                                       const std::vector<Tensor>&, const AllgatherOptions&) {
  unsupported(op);
}

WorkPtr ShmBackend::gather(const OpContext& op, std::vector<Tensor>& outputs, const Tensor& input,
                           const GatherOptions& opts) {
  return run(op, small(input.nbytes() * ctx_.worldSize),
             [this, outs = outputs, in = input, root = opts.root]() mutable {
               std::vector<void*> ptrs;
               for (const auto& t : outs) ptrs.push_back(t.data());
               channel_->expect(agree(in.nbytes(), in.dtype(), -1, root));
               shm::gather(*channel_, in.data(), in.nbytes(), ptrs.data(), root);
               return std::move(outs);
             });
}

WorkPtr ShmBackend::scatter(const OpContext& op, Tensor& output, const std::vector<Tensor>& inputs,
                            const ScatterOptions& opts) {
  return run(op, small(output.nbytes() * ctx_.worldSize),
             [this, out = output, ins = inputs, root = opts.root]() mutable {
               std::vector<const void*> ptrs;
               for (const auto& t : ins) ptrs.push_back(t.data());
               channel_->expect(agree(out.nbytes(), out.dtype(), -1, root));
               shm::scatter(*channel_, ptrs.data(), out.data(), out.nbytes(), root);
               return std::move(out);
             });
}

WorkPtr ShmBackend::reduceScatter(const OpContext& op, Tensor& output, const std::vector<Tensor>& inputs,
                                  const ReduceScatterOptions& opts) {
  return run(op, small(output.nbytes() * ctx_.worldSize),
             [this, out = output, ins = inputs, r = opts.reduceOp]() mutable {
               std::vector<const void*> ptrs;
               for (const auto& t : ins) ptrs.push_back(t.data());
               channel_->expect(agree(out.nbytes(), out.dtype(), r.kind));
               shm::reduceScatter(*channel_, ptrs.data(), out.data(), count(out), out.dtype(), r);
               return std::move(out);
             });
}

WorkPtr ShmBackend::reduceScatterTensor(const OpContext& op, Tensor& output, const Tensor& input,
                                        const ReduceScatterOptions& opts) {
  return run(op, small(input.nbytes()), [this, out = output, in = input, r = opts.reduceOp]() mutable {
    std::vector<const void*> ptrs;
    for (int d = 0; d < ctx_.worldSize; ++d) ptrs.push_back(static_cast<const uint8_t*>(in.data()) + d * out.nbytes());
    channel_->expect(agree(out.nbytes(), out.dtype(), r.kind));
    shm::reduceScatter(*channel_, ptrs.data(), out.data(), count(out), out.dtype(), r);
    return std::move(out);
  });
}

WorkPtr ShmBackend::alltoall(const OpContext& op, std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                             const AlltoallOptions&) {
  return run(op, small(totalBytes(inputs)), [this, outs = outputs, ins = inputs]() mutable {
    std::vector<const void*> in;
    std::vector<void*> out;
    std::vector<size_t> inBytes, outBytes;
    channel_->expect(agree(0, ins.empty() ? DType::Float32 : ins[0].dtype()));
    for (const auto& t : ins) in.push_back(t.data()), inBytes.push_back(t.nbytes());
    for (const auto& t : outs) out.push_back(t.data()), outBytes.push_back(t.nbytes());
    shm::alltoall(*channel_, in.data(), inBytes.data(), out.data(), outBytes.data());
    return std::move(outs);
  });
}

WorkPtr ShmBackend::alltoallSingle(const OpContext& op, Tensor& output, const Tensor& input,
                                   const AlltoallSingleOptions& opts) {
  return run(op, small(input.nbytes()), [this, out = output, in = input, opts]() mutable {
    std::vector<const void*> ins;
    std::vector<void*> outs;
    std::vector<size_t> inBytes, outBytes;
    channel_->expect(agree(0, in.dtype()));
    const int64_t inRow = rowBytes(in), outRow = rowBytes(out);
    int64_t at = 0;
    for (int64_t rows : opts.inputSplitSizes) {
      ins.push_back(static_cast<const uint8_t*>(in.data()) + at);
      inBytes.push_back(static_cast<size_t>(rows * inRow));
      at += rows * inRow;
    }
    at = 0;
    for (int64_t rows : opts.outputSplitSizes) {
      outs.push_back(static_cast<uint8_t*>(out.data()) + at);
      outBytes.push_back(static_cast<size_t>(rows * outRow));
      at += rows * outRow;
    }
    shm::alltoall(*channel_, ins.data(), inBytes.data(), outs.data(), outBytes.data());
    return std::move(out);
  });
}

WorkPtr ShmBackend::barrier(const OpContext& op, const BarrierOptions&) {
  return run(op, true, [this] {
    channel_->expect(agree(0, DType::Float32));
    channel_->barrier();
    return std::vector<Tensor>{};
  });
}

WorkPtr ShmBackend::send(const OpContext& op, const Tensor&, int, const SendOptions&) { unsupported(op); }
WorkPtr ShmBackend::recv(const OpContext& op, Tensor&, int, const RecvOptions&) { unsupported(op); }
WorkPtr ShmBackend::recvAnySource(const OpContext& op, Tensor&, const RecvOptions&) { unsupported(op); }

}  // namespace commhost::shm
