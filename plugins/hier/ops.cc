// SPDX-License-Identifier: Apache-2.0
// The hier backend's ops: each is queued, then runs as steps on the two parts.
//
// Layout of the buffers the leaders exchange: host-major, each host's block padded to
// maxLocal ranks (hosts may hold different numbers of ranks, and the inter part's
// allgather and reduce-scatter need equal blocks). The padding is never read back.
#include <cstring>

#include "commhost/errors.h"
#include "commhost/kernels/reduce.h"
#include "hier_backend.h"

namespace commhost::hier {
namespace {

// `count` elements from src[srcAt] to dst[dstAt] (element offsets, same dtype).
void copyElems(const Tensor& dst, int64_t dstAt, const Tensor& src, int64_t srcAt, int64_t count) {
  const size_t es = elementSize(src.dtype());
  if (count > 0)
    std::memcpy(static_cast<char*>(dst.data()) + dstAt * es, static_cast<const char*>(src.data()) + srcAt * es,
                static_cast<size_t>(count) * es);
}

Tensor flat(const Tensor& t) { return t.slice(0, t.numel()); }

// Avg and PreMulSum travel as sums; their factor is applied here (kernels::pairwiseScale:
// to each input for 16-bit types, which could overflow as partial sums, else once at the end).
ReduceOp stepOp(const ReduceOp& op) {
  return (op.kind == ReduceOp::Avg || op.kind == ReduceOp::PreMulSum) ? ReduceOp(ReduceOp::Sum) : op;
}

}  // namespace

// --- entry points: queue the op on the worker ----------------------------------------

WorkPtr HierBackend::allreduce(const OpContext& op, Tensor& tensor, const AllreduceOptions& opts) {
  require(op);
  return queue_->submit(op, [this, op, tensor, r = opts.reduceOp]() mutable {
    runAllreduce(op, tensor, r);
    return std::vector<Tensor>{tensor};
  });
}

WorkPtr HierBackend::allreduceCoalesced(const OpContext& op, std::vector<Tensor>& tensors,
                                        const AllreduceCoalescedOptions& opts) {
  require(op);
  return queue_->submit(op, [this, op, tensors, r = opts.reduceOp]() mutable {
    for (Tensor& t : tensors) runAllreduce(op, t, r);
    return tensors;
  });
}

WorkPtr HierBackend::broadcast(const OpContext& op, Tensor& tensor, const BroadcastOptions& opts) {
  require(op);
  return queue_->submit(op, [this, op, tensor, root = opts.root]() mutable {
    runBroadcast(op, tensor, root);
    return std::vector<Tensor>{tensor};
  });
}

WorkPtr HierBackend::allgatherIntoTensor(const OpContext& op, Tensor& output, const Tensor& input,
                                         const AllgatherOptions&) {
  require(op);
  return queue_->submit(op, [this, op, output, input]() mutable {
    runAllgather(op, output, input);
    return std::vector<Tensor>{output};
  });
}

WorkPtr HierBackend::allgather(const OpContext& op, std::vector<Tensor>& outputs, const Tensor& input,
                               const AllgatherOptions&) {
  require(op);
  return queue_->submit(op, [this, op, outputs, input]() mutable {
    Tensor all = Tensor::empty(Shape{input.numel() * topo_.worldSize()}, input.dtype());
    runAllgather(op, all, input);
    for (size_t r = 0; r < outputs.size(); ++r)
      copyElems(outputs[r], 0, all, static_cast<int64_t>(r) * input.numel(), input.numel());
    return outputs;
  });
}

WorkPtr HierBackend::reduceScatterTensor(const OpContext& op, Tensor& output, const Tensor& input,
                                         const ReduceScatterOptions& opts) {
  require(op);
  return queue_->submit(op, [this, op, output, input, r = opts.reduceOp]() mutable {
    const int64_t n = output.numel();
    runReduceScatter(
        op, output, [&](int rank) { return input.slice(rank * n, n); }, r);
    return std::vector<Tensor>{output};
  });
}

WorkPtr HierBackend::reduceScatter(const OpContext& op, Tensor& output, const std::vector<Tensor>& inputs,
                                   const ReduceScatterOptions& opts) {
  require(op);
  return queue_->submit(op, [this, op, output, inputs, r = opts.reduceOp]() mutable {
    runReduceScatter(
        op, output, [&](int rank) { return inputs[static_cast<size_t>(rank)]; }, r);
    return std::vector<Tensor>{output};
  });
}

WorkPtr HierBackend::barrier(const OpContext& op, const BarrierOptions&) {
  require(op);
  return queue_->submit(op, [this, op]() {
    runBarrier(op);
    return std::vector<Tensor>{};
  });
}

// --- algorithms (on the worker) ------------------------------------------------------

// Reduce to each host's leader, allreduce among the leaders, broadcast from each leader.
void HierBackend::runAllreduce(const OpContext& op, Tensor& tensor, const ReduceOp& reduceOp) {
  if (topo_.numHosts() == 1 && intra_.active()) {  // one host: the intra part's own allreduce, in one step
    step(intra_, OpType::Allreduce, op, [&](Backend& b, const OpContext& s) {
      return b.allreduce(s, tensor, AllreduceOptions{reduceOp, s.timeout});
    });
    return;
  }
  const kernels::ScaleSplit scale = kernels::pairwiseScale(reduceOp, topo_.worldSize(), tensor.dtype());
  const ReduceOp sum = stepOp(reduceOp);
  kernels::scaleBuffer(tensor.data(), static_cast<size_t>(tensor.numel()), tensor.dtype(), scale.input);
  reduceToLeader(op, tensor, sum);
  if (inter_.active())
    step(inter_, OpType::Allreduce, op, [&](Backend& b, const OpContext& s) {
      return b.allreduce(s, tensor, AllreduceOptions{sum, s.timeout});
    });
  if (local_ == 0)
    kernels::scaleBuffer(tensor.data(), static_cast<size_t>(tensor.numel()), tensor.dtype(), scale.output);
  if (intra_.active())
    step(intra_, OpType::Broadcast, op, [&](Backend& b, const OpContext& s) {
      return b.broadcast(s, tensor, BroadcastOptions{0, s.timeout});
    });
}

void HierBackend::reduceToLeader(const OpContext& op, Tensor& tensor, const ReduceOp& sum) {
  if (!intra_.active()) return;
  step(intra_, intraReduce_, op, [&](Backend& b, const OpContext& s) {
    if (intraReduce_ == OpType::Reduce) return b.reduce(s, tensor, ReduceOptions{0, sum, s.timeout});
    return b.allreduce(s, tensor, AllreduceOptions{sum, s.timeout});
  });
}

// Inside the root's host first (so its leader holds the data), then among the leaders,
// then inside every other host.
void HierBackend::runBroadcast(const OpContext& op, Tensor& tensor, int root) {
  const int rootHost = topo_.hostOf[static_cast<size_t>(root)];
  auto within = [&](int localRoot) {
    if (intra_.active())
      step(intra_, OpType::Broadcast, op, [&](Backend& b, const OpContext& s) {
        return b.broadcast(s, tensor, BroadcastOptions{localRoot, s.timeout});
      });
  };
  auto across = [&] {
    if (inter_.active())
      step(inter_, OpType::Broadcast, op, [&](Backend& b, const OpContext& s) {
        return b.broadcast(s, tensor, BroadcastOptions{rootHost, s.timeout});
      });
  };
  if (host_ == rootHost) {
    within(topo_.localIndex[static_cast<size_t>(root)]);
    across();
  } else {
    across();
    within(0);
  }
}

// Gather each host's inputs at its leader, allgather the (padded) host blocks among the
// leaders, put them in rank order, broadcast inside each host.
void HierBackend::runAllgather(const OpContext& op, Tensor& output, const Tensor& input) {
  const int64_t n = input.numel();
  Tensor out = flat(output);
  if (topo_.numHosts() == 1) {
    if (!intra_.active()) return copyElems(out, 0, input, 0, n);
    step(intra_, OpType::AllgatherIntoTensor, op, [&](Backend& b, const OpContext& s) {
      return b.allgatherIntoTensor(s, out, input, AllgatherOptions{s.timeout});
    });
    return;
  }
  const int64_t m = topo_.maxLocal;
  const auto& mine = topo_.hosts[static_cast<size_t>(host_)];
  Tensor block = local_ == 0 ? Tensor::empty(Shape{m * n}, input.dtype()) : Tensor();
  if (intra_.active()) {
    std::vector<Tensor> parts;
    if (local_ == 0)
      for (size_t j = 0; j < mine.size(); ++j) parts.push_back(block.slice(static_cast<int64_t>(j) * n, n));
    step(intra_, OpType::Gather, op, [&](Backend& b, const OpContext& s) {
      return b.gather(s, parts, input, GatherOptions{0, s.timeout});
    });
  } else {
    copyElems(block, 0, input, 0, n);
  }
  if (inter_.active()) {
    Tensor all = Tensor::empty(Shape{topo_.numHosts() * m * n}, input.dtype());
    step(inter_, OpType::AllgatherIntoTensor, op, [&](Backend& b, const OpContext& s) {
      return b.allgatherIntoTensor(s, all, block, AllgatherOptions{s.timeout});
    });
    for (size_t g = 0; g < topo_.hosts.size(); ++g)
      for (size_t j = 0; j < topo_.hosts[g].size(); ++j)
        copyElems(out, topo_.hosts[g][j] * n, all, (static_cast<int64_t>(g) * m + static_cast<int64_t>(j)) * n, n);
  }
  if (intra_.active())
    step(intra_, OpType::Broadcast, op, [&](Backend& b, const OpContext& s) {
      return b.broadcast(s, out, BroadcastOptions{0, s.timeout});
    });
}

// Arrange the inputs host-major (padded), reduce them to each host's leader,
// reduce-scatter the host blocks among the leaders, scatter each block inside its host.
void HierBackend::runReduceScatter(const OpContext& op, Tensor& output, const std::function<Tensor(int)>& blockFor,
                                   const ReduceOp& reduceOp) {
  const int64_t n = output.numel();
  const int64_t m = topo_.maxLocal;
  const DType dtype = output.dtype();
  const kernels::ScaleSplit scale = kernels::pairwiseScale(reduceOp, topo_.worldSize(), dtype);
  const ReduceOp sum = stepOp(reduceOp);
  Tensor all = Tensor::empty(Shape{topo_.numHosts() * m * n}, dtype);
  for (size_t g = 0; g < topo_.hosts.size(); ++g)
    for (size_t j = 0; j < topo_.hosts[g].size(); ++j)
      copyElems(all, (static_cast<int64_t>(g) * m + static_cast<int64_t>(j)) * n, blockFor(topo_.hosts[g][j]), 0, n);
  if (topo_.numHosts() == 1 && intra_.active()) {  // one host (ranks in order): the intra part's own op
    step(intra_, OpType::ReduceScatterTensor, op, [&](Backend& b, const OpContext& s) {
      return b.reduceScatterTensor(s, output, all, ReduceScatterOptions{reduceOp, s.timeout});
    });
    return;
  }
  kernels::scaleBuffer(all.data(), static_cast<size_t>(all.numel()), dtype, scale.input);
  reduceToLeader(op, all, sum);
  Tensor hostBlock = all.slice(host_ * m * n, m * n);
  if (inter_.active()) {
    hostBlock = Tensor::empty(Shape{m * n}, dtype);
    step(inter_, OpType::ReduceScatterTensor, op, [&](Backend& b, const OpContext& s) {
      return b.reduceScatterTensor(s, hostBlock, all, ReduceScatterOptions{sum, s.timeout});
    });
  }
  const auto& mine = topo_.hosts[static_cast<size_t>(host_)];
  if (local_ == 0)
    kernels::scaleBuffer(hostBlock.data(), static_cast<size_t>(static_cast<int64_t>(mine.size()) * n), dtype,
                         scale.output);
  if (!intra_.active()) return copyElems(output, 0, hostBlock, 0, n);
  std::vector<Tensor> parts;
  if (local_ == 0)
    for (size_t j = 0; j < mine.size(); ++j) parts.push_back(hostBlock.slice(static_cast<int64_t>(j) * n, n));
  step(intra_, OpType::Scatter, op, [&](Backend& b, const OpContext& s) {
    return b.scatter(s, output, parts, ScatterOptions{0, s.timeout});
  });
}

void HierBackend::runBarrier(const OpContext& op) {
  auto within = [&] {
    if (intra_.active())
      step(intra_, OpType::Barrier, op,
           [&](Backend& b, const OpContext& s) { return b.barrier(s, BarrierOptions{s.timeout}); });
  };
  within();
  if (inter_.active())
    step(inter_, OpType::Barrier, op,
         [&](Backend& b, const OpContext& s) { return b.barrier(s, BarrierOptions{s.timeout}); });
  within();
}

}  // namespace commhost::hier
