// SPDX-License-Identifier: Apache-2.0
// Each op of the gloo backend: map tensors to buffers, queue the Gloo call. Ops Gloo
// lacks are composed: reduce_scatter = allreduce of a copy + own slice; list forms
// pack into one contiguous buffer. Jobs capture tensors by value to keep them alive.
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <cstring>

#include "commhost/sdk/backend_sdk.h"
#include "gloo_backend.h"

namespace commhost::gloo_backend {
namespace {

Buffer buffer(const Tensor& t) { return {t.data(), static_cast<size_t>(t.numel()), t.dtype()}; }

int64_t rowElements(const Tensor& t) { return t.shape().ndim() && t.shape()[0] ? t.numel() / t.shape()[0] : 0; }

// Copies `parts` end to end into one new tensor.
Tensor pack(const std::vector<Tensor>& parts) {
  int64_t total = 0;
  for (const auto& p : parts) total += p.numel();
  Tensor flat = Tensor::empty({total}, parts.empty() ? DType::UInt8 : parts[0].dtype());
  auto* at = static_cast<uint8_t*>(flat.data());
  for (const auto& p : parts) {
    std::memcpy(at, p.data(), p.nbytes());
    at += p.nbytes();
  }
  return flat;
}

void unpack(const uint8_t* from, std::vector<Tensor>& parts) {
  for (auto& p : parts) {
    std::memcpy(p.data(), from, p.nbytes());
    from += p.nbytes();
  }
}

}  // namespace

WorkPtr GlooBackend::allreduce(const OpContext& op, Tensor& tensor, const AllreduceOptions& opts) {
  return submit(op, tensor.nbytes(), [this, call = callFor(op), t = tensor, r = opts.reduceOp] {
    gloo_backend::allreduce(call, buffer(t), r, algorithm_, ringThreshold_);
    return std::vector<Tensor>{t};
  });
}

WorkPtr GlooBackend::allreduceCoalesced(const OpContext& op, std::vector<Tensor>& tensors,
                                        const AllreduceCoalescedOptions& opts) {
  return submit(op, totalBytes(tensors), [this, call = callFor(op), ts = tensors, r = opts.reduceOp]() mutable {
    Tensor flat = pack(ts);
    gloo_backend::allreduce(call, buffer(flat), r, algorithm_, ringThreshold_);
    unpack(static_cast<uint8_t*>(flat.data()), ts);
    return ts;
  });
}

WorkPtr GlooBackend::broadcast(const OpContext& op, Tensor& tensor, const BroadcastOptions& opts) {
  return submit(op, tensor.nbytes(), [call = callFor(op), t = tensor, root = opts.root] {
    gloo_backend::broadcast(call, buffer(t), root);
    return std::vector<Tensor>{t};
  });
}

WorkPtr GlooBackend::reduce(const OpContext& op, Tensor& tensor, const ReduceOptions& opts) {
  return submit(op, tensor.nbytes(), [call = callFor(op), t = tensor, r = opts.reduceOp, root = opts.root] {
    gloo_backend::reduce(call, buffer(t), r, root);
    return std::vector<Tensor>{t};
  });
}

WorkPtr GlooBackend::allgather(const OpContext& op, std::vector<Tensor>& outputs, const Tensor& input,
                               const AllgatherOptions&) {
  return submit(op, totalBytes(outputs), [call = callFor(op), outs = outputs, in = input]() mutable {
    Tensor flat = Tensor::empty({in.numel() * call.size()}, in.dtype());
    gloo_backend::allgather(call, buffer(in), flat.data());
    unpack(static_cast<uint8_t*>(flat.data()), outs);
    return outs;
  });
}

WorkPtr GlooBackend::allgatherIntoTensor(const OpContext& op, Tensor& output, const Tensor& input,
                                         const AllgatherOptions&) {
  return submit(op, output.nbytes(), [call = callFor(op), out = output, in = input] {
    gloo_backend::allgather(call, buffer(in), out.data());
    return std::vector<Tensor>{out};
  });
}

WorkPtr GlooBackend::allgatherCoalesced(const OpContext& op, std::vector<std::vector<Tensor>>& outputs,
                                        const std::vector<Tensor>& inputs, const AllgatherOptions&) {
  return submit(op, totalBytes(inputs) * ctx_.worldSize, [call = callFor(op), outs = outputs, ins = inputs]() mutable {
    // One allgather of every input packed together; rank r's block holds its inputs in order.
    Tensor mine = pack(ins);
    Tensor all = Tensor::empty({mine.numel() * call.size()}, mine.dtype());
    gloo_backend::allgather(call, buffer(mine), all.data());
    std::vector<Tensor> flat;
    for (int r = 0; r < call.size(); ++r) {
      std::vector<Tensor> block;
      for (auto& list : outs) block.push_back(list[r]);
      unpack(static_cast<uint8_t*>(all.data()) + r * mine.nbytes(), block);
    }
    for (auto& list : outs) flat.insert(flat.end(), list.begin(), list.end());
    return flat;
  });
}

WorkPtr GlooBackend::gather(const OpContext& op, std::vector<Tensor>& outputs, const Tensor& input,
                            const GatherOptions& opts) {
  return submit(op, input.nbytes() * ctx_.worldSize,
                [call = callFor(op), outs = outputs, in = input, root = opts.root]() mutable {
                  Tensor flat;
                  if (call.rank() == root) flat = Tensor::empty({in.numel() * call.size()}, in.dtype());
                  gloo_backend::gather(call, buffer(in), flat.data(), root);
                  if (call.rank() == root) unpack(static_cast<uint8_t*>(flat.data()), outs);
                  return outs;
                });
}

WorkPtr GlooBackend::scatter(const OpContext& op, Tensor& output, const std::vector<Tensor>& inputs,
                             const ScatterOptions& opts) {
  return submit(op, output.nbytes() * ctx_.worldSize,
                [call = callFor(op), out = output, ins = inputs, root = opts.root] {
                  std::vector<void*> ptrs;
                  for (const auto& t : ins) ptrs.push_back(t.data());
                  gloo_backend::scatter(call, ptrs, buffer(out), root);
                  return std::vector<Tensor>{out};
                });
}

WorkPtr GlooBackend::reduceScatter(const OpContext& op, Tensor& output, const std::vector<Tensor>& inputs,
                                   const ReduceScatterOptions& opts) {
  return submit(op, totalBytes(inputs), [this, call = callFor(op), out = output, ins = inputs, r = opts.reduceOp] {
    Tensor all = pack(ins);
    gloo_backend::allreduce(call, buffer(all), r, algorithm_, ringThreshold_);
    std::memcpy(out.data(), static_cast<uint8_t*>(all.data()) + call.rank() * out.nbytes(), out.nbytes());
    return std::vector<Tensor>{out};
  });
}

WorkPtr GlooBackend::reduceScatterTensor(const OpContext& op, Tensor& output, const Tensor& input,
                                         const ReduceScatterOptions& opts) {
  return submit(op, input.nbytes(), [this, call = callFor(op), out = output, in = input, r = opts.reduceOp] {
    Tensor all = pack({in});
    gloo_backend::allreduce(call, buffer(all), r, algorithm_, ringThreshold_);
    std::memcpy(out.data(), static_cast<uint8_t*>(all.data()) + call.rank() * out.nbytes(), out.nbytes());
    return std::vector<Tensor>{out};
  });
}

WorkPtr GlooBackend::alltoall(const OpContext& op, std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                              const AlltoallOptions&) {
  return submit(op, std::max(totalBytes(inputs), totalBytes(outputs)),
                [call = callFor(op), outs = outputs, ins = inputs]() mutable {
                  std::vector<int64_t> inCounts, outCounts;
                  for (const auto& t : ins) inCounts.push_back(t.numel());
                  for (const auto& t : outs) outCounts.push_back(t.numel());
                  Tensor in = pack(ins);
                  int64_t outTotal = 0;
                  for (int64_t c : outCounts) outTotal += c;
                  Tensor out = Tensor::empty({outTotal}, in.dtype());  // received into, so nothing to copy in
                  gloo_backend::alltoallv(call, in.data(), inCounts, out.data(), outCounts, in.dtype());
                  unpack(static_cast<uint8_t*>(out.data()), outs);
                  return outs;
                });
}

WorkPtr GlooBackend::alltoallSingle(const OpContext& op, Tensor& output, const Tensor& input,
                                    const AlltoallSingleOptions& opts) {
  return submit(op, std::max(input.nbytes(), output.nbytes()), [call = callFor(op), out = output, in = input, opts] {
    std::vector<int64_t> inCounts, outCounts;
    for (int64_t rows : opts.inputSplitSizes) inCounts.push_back(rows * rowElements(in));
    for (int64_t rows : opts.outputSplitSizes) outCounts.push_back(rows * rowElements(out));
    gloo_backend::alltoallv(call, in.data(), inCounts, out.data(), outCounts, in.dtype());
    return std::vector<Tensor>{out};
  });
}

WorkPtr GlooBackend::barrier(const OpContext& op, const BarrierOptions&) {
  return submit(op, 0, [call = callFor(op)] {
    gloo_backend::barrier(call);
    return std::vector<Tensor>{};
  });
}

// Point-to-point runs on its own context; Gloo matches messages by (peer, slot), in
// order. Sends and receives are posted at once on the calling thread and only waited
// for on the p2p thread: a blocked send must not keep the matching receive from being
// posted (two ranks exchanging would deadlock).
WorkPtr GlooBackend::send(const OpContext& op, const Tensor& tensor, int dst, const SendOptions& opts) {
  std::shared_ptr<::gloo::transport::UnboundBuffer> buf;
  if (auto failed = postP2P(op, [&] {
        buf = p2p_->createUnboundBuffer(tensor.data(), tensor.nbytes());
        buf->send(dst, static_cast<uint64_t>(opts.tag));
      }))
    return failed;
  return submitP2P(op, [buf, t = tensor, timeout = op.timeout, retired = retired_] {
    if (buf->waitSend(timeout)) retired->keep(buf);  // false only if aborted: maybe still posted
    return std::vector<Tensor>{};
  });
}

WorkPtr GlooBackend::recv(const OpContext& op, Tensor& tensor, int src, const RecvOptions& opts) {
  std::shared_ptr<::gloo::transport::UnboundBuffer> buf;
  if (auto failed = postP2P(op, [&] {
        buf = p2p_->createUnboundBuffer(tensor.data(), tensor.nbytes());
        buf->recv(src, static_cast<uint64_t>(opts.tag));
      }))
    return failed;
  return submitP2P(op, [buf, t = tensor, timeout = op.timeout, retired = retired_] {
    if (buf->waitRecv(timeout)) retired->keep(buf);
    return std::vector<Tensor>{t};
  });
}

WorkPtr GlooBackend::recvAnySource(const OpContext& op, Tensor& tensor, const RecvOptions& opts) {
  std::vector<int> peers;
  for (int r = 0; r < p2p_->size; ++r)
    if (r != p2p_->rank) peers.push_back(r);
  std::shared_ptr<::gloo::transport::UnboundBuffer> buf;
  if (auto failed = postP2P(op, [&] {
        buf = p2p_->createUnboundBuffer(tensor.data(), tensor.nbytes());
        buf->recv(peers, static_cast<uint64_t>(opts.tag));
      }))
    return failed;
  // The job finishes the work itself, with the source rank; errors and abort reach it
  // through the queue like any other work.
  auto work = std::make_shared<AsyncWork>(op);
  return submitP2P(
      op,
      [buf, t = tensor, timeout = op.timeout, work, retired = retired_] {
        int source = -1;
        if (buf->waitRecv(&source, timeout)) retired->keep(buf);
        work->finish({t}, source);
        return std::vector<Tensor>{t};
      },
      work);
}

// Posting writes to the peer's socket on the caller's thread, and Gloo throws there
// (IoException) once that peer is gone: the caller gets a failed work, never a raw
// Gloo exception (one that reached a thread's top would terminate the process).
WorkPtr GlooBackend::postP2P(const OpContext& op, const std::function<void()>& post) const {
  try {
    post();
    return nullptr;
  } catch (...) {
    auto work = std::make_shared<AsyncWork>(op);
    work->fail(describe(op, std::current_exception(), std::chrono::steady_clock::now(), true));  // a post never waits
    return work;
  }
}

}  // namespace commhost::gloo_backend
