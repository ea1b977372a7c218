// SPDX-License-Identifier: Apache-2.0
// The op mapping: each commhost op as NCCL calls inside one ncclGroupStart/End. Ops
// without an NCCL collective of their own (allgather and reduce_scatter into lists,
// gather, scatter, alltoall) are grouped broadcasts, reduces or send/recv pairs, as c10d
// does, so they need no temporary device buffers.
#include "nccl_backend.h"

namespace commhost::nccl_backend {

namespace {

ncclDataType_t typeOf(const Tensor& t) { return *toNccl(t.dtype()); }
size_t count(const Tensor& t) { return static_cast<size_t>(t.numel()); }
int deviceOf(const Tensor& t) { return t.device().index; }

std::vector<Tensor> concat(std::vector<Tensor> a, const std::vector<Tensor>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

WorkPtr NcclBackend::allreduce(const OpContext& op, Tensor& tensor, const AllreduceOptions& opts) {
  if (options_.intraNode)
    if (WorkPtr work = intraAllreduce(op, tensor, opts)) return work;
  Op d{deviceOf(tensor), {tensor}, {tensor}, {tensor}};
  const Tensor t = tensor;
  return reduction(op, std::move(d), opts.reduceOp, t.dtype(), [t](ncclComm_t c, cudaStream_t s, ncclRedOp_t r) {
    return ncclAllReduce(t.data(), t.data(), count(t), typeOf(t), r, c, s);
  });
}

WorkPtr NcclBackend::allreduceCoalesced(const OpContext& op, std::vector<Tensor>& tensors,
                                        const AllreduceCoalescedOptions& opts) {
  Op d{tensors.empty() ? currentDevice(op) : deviceOf(tensors[0]), tensors, tensors, tensors};
  const std::vector<Tensor> ts = tensors;
  const DType dtype = ts.empty() ? DType::Float32 : ts[0].dtype();
  return reduction(op, std::move(d), opts.reduceOp, dtype, [ts](ncclComm_t c, cudaStream_t s, ncclRedOp_t r) {
    for (const auto& t : ts)
      if (ncclResult_t e = ncclAllReduce(t.data(), t.data(), count(t), typeOf(t), r, c, s); e != ncclSuccess) return e;
    return ncclSuccess;
  });
}

WorkPtr NcclBackend::broadcast(const OpContext& op, Tensor& tensor, const BroadcastOptions& opts) {
  const bool root = ctx_.rank == opts.root;
  Op d{deviceOf(tensor), {tensor}, {tensor}, root ? std::vector<Tensor>{tensor} : std::vector<Tensor>{}};
  const Tensor t = tensor;
  const int rootRank = opts.root;
  return run(op, std::move(d), [t, rootRank](ncclComm_t c, cudaStream_t s) {
    return ncclBroadcast(t.data(), t.data(), count(t), typeOf(t), rootRank, c, s);
  });
}

WorkPtr NcclBackend::reduce(const OpContext& op, Tensor& tensor, const ReduceOptions& opts) {
  Op d{deviceOf(tensor), {tensor}, {tensor}, {tensor}};
  const Tensor t = tensor;
  const int root = opts.root;
  return reduction(op, std::move(d), opts.reduceOp, t.dtype(), [t, root](ncclComm_t c, cudaStream_t s, ncclRedOp_t r) {
    return ncclReduce(t.data(), t.data(), count(t), typeOf(t), r, root, c, s);
  });
}

WorkPtr NcclBackend::allgather(const OpContext& op, std::vector<Tensor>& outputs, const Tensor& input,
                               const AllgatherOptions&) {
  Op d{deviceOf(input), concat({input}, outputs), outputs, {input}};
  const Tensor in = input;
  const std::vector<Tensor> outs = outputs;
  // One broadcast per rank: rank r's input lands in every rank's outputs[r].
  return run(op, std::move(d), [in, outs](ncclComm_t c, cudaStream_t s) {
    for (size_t r = 0; r < outs.size(); ++r)
      if (ncclResult_t e = ncclBroadcast(in.data(), outs[r].data(), count(in), typeOf(in), static_cast<int>(r), c, s);
          e != ncclSuccess)
        return e;
    return ncclSuccess;
  });
}

WorkPtr NcclBackend::allgatherIntoTensor(const OpContext& op, Tensor& output, const Tensor& input,
                                         const AllgatherOptions&) {
  Op d{deviceOf(input), {input, output}, {output}, {input}};
  const Tensor in = input, out = output;
  return run(op, std::move(d), [in, out](ncclComm_t c, cudaStream_t s) {
    return ncclAllGather(in.data(), out.data(), count(in), typeOf(in), c, s);
  });
}

WorkPtr NcclBackend::allgatherCoalesced(const OpContext& op, std::vector<std::vector<Tensor>>& outputs,
                                        const std::vector<Tensor>& inputs, const AllgatherOptions&) {
  std::vector<Tensor> flat;
  for (const auto& outs : outputs) flat.insert(flat.end(), outs.begin(), outs.end());
  Op d{inputs.empty() ? currentDevice(op) : deviceOf(inputs[0]), concat(inputs, flat), flat, inputs};
  const std::vector<std::vector<Tensor>> outs = outputs;
  const std::vector<Tensor> ins = inputs;
  return run(op, std::move(d), [outs, ins](ncclComm_t c, cudaStream_t s) {
    for (size_t i = 0; i < ins.size(); ++i)
      for (size_t r = 0; r < outs[i].size(); ++r)
        if (ncclResult_t e = ncclBroadcast(ins[i].data(), outs[i][r].data(), count(ins[i]), typeOf(ins[i]),
                                           static_cast<int>(r), c, s);
            e != ncclSuccess)
          return e;
    return ncclSuccess;
  });
}

WorkPtr NcclBackend::gather(const OpContext& op, std::vector<Tensor>& outputs, const Tensor& input,
                            const GatherOptions& opts) {
  Op d{deviceOf(input), concat({input}, outputs), outputs, {input}};
  const Tensor in = input;
  const std::vector<Tensor> outs = outputs;
  const int root = opts.root, me = ctx_.rank;
  return run(op, std::move(d), [in, outs, root, me](ncclComm_t c, cudaStream_t s) {
    if (me != root) return ncclSend(in.data(), count(in), typeOf(in), root, c, s);
    for (size_t r = 0; r < outs.size(); ++r) {
      if (static_cast<int>(r) == me) {
        if (cudaMemcpyAsync(outs[r].data(), in.data(), in.nbytes(), cudaMemcpyDeviceToDevice, s) != cudaSuccess)
          return ncclUnhandledCudaError;
      } else if (ncclResult_t e = ncclRecv(outs[r].data(), count(outs[r]), typeOf(in), static_cast<int>(r), c, s);
                 e != ncclSuccess) {
        return e;
      }
    }
    return ncclSuccess;
  });
}

WorkPtr NcclBackend::scatter(const OpContext& op, Tensor& output, const std::vector<Tensor>& inputs,
                             const ScatterOptions& opts) {
  Op d{deviceOf(output), concat({output}, inputs), {output}, inputs};
  const Tensor out = output;
  const std::vector<Tensor> ins = inputs;
  const int root = opts.root, me = ctx_.rank;
  return run(op, std::move(d), [out, ins, root, me](ncclComm_t c, cudaStream_t s) {
    if (me != root) return ncclRecv(out.data(), count(out), typeOf(out), root, c, s);
    for (size_t r = 0; r < ins.size(); ++r) {
      if (static_cast<int>(r) == me) {
        if (cudaMemcpyAsync(out.data(), ins[r].data(), out.nbytes(), cudaMemcpyDeviceToDevice, s) != cudaSuccess)
          return ncclUnhandledCudaError;
      } else if (ncclResult_t e = ncclSend(ins[r].data(), count(ins[r]), typeOf(out), static_cast<int>(r), c, s);
                 e != ncclSuccess) {
        return e;
      }
    }
    return ncclSuccess;
  });
}

WorkPtr NcclBackend::reduceScatter(const OpContext& op, Tensor& output, const std::vector<Tensor>& inputs,
                                   const ReduceScatterOptions& opts) {
  Op d{deviceOf(output), concat({output}, inputs), {output}, inputs};
  const Tensor out = output;
  const std::vector<Tensor> ins = inputs;
  const int me = ctx_.rank;
  // One reduce per rank: every rank's inputs[r] reduced into rank r's output.
  return reduction(
      op, std::move(d), opts.reduceOp, out.dtype(), [out, ins, me](ncclComm_t c, cudaStream_t s, ncclRedOp_t red) {
        for (size_t r = 0; r < ins.size(); ++r) {
          void* recv = static_cast<int>(r) == me ? out.data() : nullptr;
          if (ncclResult_t e = ncclReduce(ins[r].data(), recv, count(out), typeOf(out), red, static_cast<int>(r), c, s);
              e != ncclSuccess)
            return e;
        }
        return ncclSuccess;
      });
}

WorkPtr NcclBackend::reduceScatterTensor(const OpContext& op, Tensor& output, const Tensor& input,
                                         const ReduceScatterOptions& opts) {
  Op d{deviceOf(output), {input, output}, {output}, {input}};
  const Tensor in = input, out = output;
  return reduction(op, std::move(d), opts.reduceOp, out.dtype(),
                   [in, out](ncclComm_t c, cudaStream_t s, ncclRedOp_t r) {
                     return ncclReduceScatter(in.data(), out.data(), count(out), typeOf(out), r, c, s);
                   });
}

WorkPtr NcclBackend::alltoall(const OpContext& op, std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                              const AlltoallOptions&) {
  Op d{inputs.empty() ? currentDevice(op) : deviceOf(inputs[0]), concat(outputs, inputs), outputs, inputs};
  const std::vector<Tensor> outs = outputs, ins = inputs;
  return run(op, std::move(d), [outs, ins](ncclComm_t c, cudaStream_t s) {
    for (size_t r = 0; r < ins.size(); ++r) {
      const int peer = static_cast<int>(r);
      if (ncclResult_t e = ncclSend(ins[r].data(), count(ins[r]), typeOf(ins[r]), peer, c, s); e != ncclSuccess)
        return e;
      if (ncclResult_t e = ncclRecv(outs[r].data(), count(outs[r]), typeOf(outs[r]), peer, c, s); e != ncclSuccess)
        return e;
    }
    return ncclSuccess;
  });
}

WorkPtr NcclBackend::alltoallSingle(const OpContext& op, Tensor& output, const Tensor& input,
                                    const AlltoallSingleOptions& opts) {
  Op d{deviceOf(input), {input, output}, {output}, {input}};
  const Tensor in = input, out = output;
  const int world = ctx_.worldSize;
  // Elements per row of dimension 0: split sizes count rows.
  const int64_t rows = in.shape().ndim() > 0 ? in.shape()[0] : in.numel();
  const int64_t rowElems = rows > 0 ? in.numel() / rows : 0;
  auto splits = [&](const std::vector<int64_t>& given, const Tensor& t) {
    std::vector<int64_t> s = given;
    if (s.empty()) s.assign(world, (t.shape().ndim() > 0 ? t.shape()[0] : t.numel()) / world);
    return s;
  };
  const std::vector<int64_t> inSplits = splits(opts.inputSplitSizes, in),
                             outSplits = splits(opts.outputSplitSizes, out);
  const size_t elem = elementSize(in.dtype());
  return run(op, std::move(d), [=](ncclComm_t c, cudaStream_t s) {
    int64_t inOff = 0, outOff = 0;
    for (int r = 0; r < world; ++r) {
      const auto* src = static_cast<const char*>(in.data()) + inOff * rowElems * elem;
      auto* dst = static_cast<char*>(out.data()) + outOff * rowElems * elem;
      const size_t sendCount = static_cast<size_t>(inSplits[r] * rowElems);
      const size_t recvCount = static_cast<size_t>(outSplits[r] * rowElems);
      if (ncclResult_t e = ncclSend(src, sendCount, typeOf(in), r, c, s); e != ncclSuccess) return e;
      if (ncclResult_t e = ncclRecv(dst, recvCount, typeOf(in), r, c, s); e != ncclSuccess) return e;
      inOff += inSplits[r];
      outOff += outSplits[r];
    }
    return ncclSuccess;
  });
}

WorkPtr NcclBackend::barrier(const OpContext& op, const BarrierOptions&) {
  int device = -1;
  {
    MutexLock lock(&mutex_);
    if (!devices_.empty()) device = devices_.begin()->first;
  }
  if (device < 0) device = currentDevice(op);
  float* buf = deviceState(op, device).barrierBuf;
  Op d{device, {}, {}, {}, true};  // a barrier blocks the CPU in wait(), as c10d's does
  return run(op, std::move(d),
             [buf](ncclComm_t c, cudaStream_t s) { return ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, c, s); });
}

WorkPtr NcclBackend::send(const OpContext& op, const Tensor& tensor, int dst, const SendOptions&) {
  Op d{deviceOf(tensor), {tensor}, {}, {tensor}};
  const Tensor t = tensor;
  return run(op, std::move(d),
             [t, dst](ncclComm_t c, cudaStream_t s) { return ncclSend(t.data(), count(t), typeOf(t), dst, c, s); });
}

WorkPtr NcclBackend::recv(const OpContext& op, Tensor& tensor, int src, const RecvOptions&) {
  Op d{deviceOf(tensor), {tensor}, {tensor}, {}};
  const Tensor t = tensor;
  return run(op, std::move(d),
             [t, src](ncclComm_t c, cudaStream_t s) { return ncclRecv(t.data(), count(t), typeOf(t), src, c, s); });
}

}  // namespace commhost::nccl_backend
