// SPDX-License-Identifier: Apache-2.0
#include "algorithms.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/gather.h>
#include <gloo/reduce.h>
#include <gloo/scatter.h>

#include <cstring>
#include <type_traits>

#include "commhost/kernels/reduce.h"

namespace commhost::gloo_backend {
namespace {

// Gloo's reduce function: out = a op b over n elements, from commhost's kernels so
// every dtype (f16/bf16 via f32) and every op works the same as on other backends.
std::function<void(void*, const void*, const void*, size_t)> reduceFunction(DType dtype, ReduceOp::Kind kind) {
  const size_t es = elementSize(dtype);
  return [dtype, kind, es](void* out, const void* a, const void* b, size_t n) {
    if (out != a) std::memmove(out, a, n * es);
    kernels::reduceBuffer(out, b, n, dtype, kind);
  };
}

// On the heap, so that once the op has succeeded its buffers can be retired rather than
// destroyed on the spot (see retired.h); a failed op's go with the exception.
template <class Options> std::shared_ptr<Options> optionsFor(const Call& call) {
  auto o = std::make_shared<Options>(call.context);
  o->setTag(call.tag);
  o->setTimeout(call.timeout);
  return o;
}

}  // namespace

void allreduce(const Call& call, Buffer buf, const ReduceOp& op, AllreduceAlgorithm algorithm, int64_t ringThreshold) {
  // Gloo folds pairwise through 16-bit partial sums: see kernels::pairwiseScale.
  const kernels::ScaleSplit scale = kernels::pairwiseScale(op, call.size(), buf.dtype);
  kernels::scaleBuffer(buf.data, buf.count, buf.dtype, scale.input);
  if (call.size() > 1 && buf.count > 0) {
    auto held = optionsFor<::gloo::AllreduceOptions>(call);
    auto& o = *held;
    withStorageType(buf.dtype, [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      o.setOutput(static_cast<T*>(buf.data), buf.count);
    });
    o.setReduceFunction(reduceFunction(buf.dtype, op.kind));
    if (algorithm == AllreduceAlgorithm::Auto)
      algorithm = static_cast<int64_t>(buf.bytes()) >= ringThreshold ? AllreduceAlgorithm::Ring
                                                                     : AllreduceAlgorithm::Bcube;
    o.setAlgorithm(algorithm == AllreduceAlgorithm::Ring ? ::gloo::AllreduceOptions::Algorithm::RING
                                                         : ::gloo::AllreduceOptions::Algorithm::BCUBE);
    ::gloo::allreduce(o);
    call.retire(std::move(held));
  }
  kernels::scaleBuffer(buf.data, buf.count, buf.dtype, scale.output);
}

void reduce(const Call& call, Buffer buf, const ReduceOp& op, int root) {
  const kernels::ScaleSplit scale = kernels::pairwiseScale(op, call.size(), buf.dtype);
  kernels::scaleBuffer(buf.data, buf.count, buf.dtype, scale.input);
  if (call.size() > 1 && buf.count > 0) {
    auto held = optionsFor<::gloo::ReduceOptions>(call);
    auto& o = *held;
    withStorageType(buf.dtype, [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      o.setOutput(static_cast<T*>(buf.data), buf.count);
    });
    o.setRoot(root);
    o.setReduceFunction(reduceFunction(buf.dtype, op.kind));
    ::gloo::reduce(o);
    call.retire(std::move(held));
  }
  if (call.rank() == root) kernels::scaleBuffer(buf.data, buf.count, buf.dtype, scale.output);
}

void broadcast(const Call& call, Buffer buf, int root) {
  if (call.size() == 1 || buf.count == 0) return;
  auto held = optionsFor<::gloo::BroadcastOptions>(call);
  auto& o = *held;
  // Gloo wants an output on the root too, and copies the input into it while sending
  // the input: so in place, the root sends from a copy rather than from the buffer
  // being copied onto itself.
  auto* bytes = static_cast<uint8_t*>(buf.data);
  std::vector<uint8_t> copy;
  if (call.rank() == root) {
    copy.assign(bytes, bytes + buf.bytes());
    o.setInput(copy.data(), copy.size());
  }
  o.setOutput(bytes, buf.bytes());
  o.setRoot(root);
  ::gloo::broadcast(o);
  call.retire(std::move(held));
}

void allgather(const Call& call, Buffer in, void* out) {
  if (in.bytes() == 0) return;
  auto held = optionsFor<::gloo::AllgatherOptions>(call);
  auto& o = *held;
  o.setInput(static_cast<uint8_t*>(in.data), in.bytes());
  o.setOutput(static_cast<uint8_t*>(out), in.bytes() * call.size());
  ::gloo::allgather(o);
  call.retire(std::move(held));
}

void gather(const Call& call, Buffer in, void* out, int root) {
  if (in.bytes() == 0) return;
  auto held = optionsFor<::gloo::GatherOptions>(call);
  auto& o = *held;
  o.setInput(static_cast<uint8_t*>(in.data), in.bytes());
  if (call.rank() == root) o.setOutput(static_cast<uint8_t*>(out), in.bytes() * call.size());
  o.setRoot(root);
  ::gloo::gather(o);
  call.retire(std::move(held));
}

void scatter(const Call& call, const std::vector<void*>& ins, Buffer out, int root) {
  if (out.bytes() == 0) return;
  auto held = optionsFor<::gloo::ScatterOptions>(call);
  auto& o = *held;
  if (!ins.empty()) {
    std::vector<uint8_t*> ptrs;
    for (void* p : ins) ptrs.push_back(static_cast<uint8_t*>(p));
    o.setInputs(ptrs, out.bytes());
  }
  o.setOutput(static_cast<uint8_t*>(out.data), out.bytes());
  o.setRoot(root);
  ::gloo::scatter(o);
  call.retire(std::move(held));
}

void alltoallv(const Call& call, const void* in, const std::vector<int64_t>& inCounts, void* out,
               const std::vector<int64_t>& outCounts, DType dtype) {
  const int64_t es = static_cast<int64_t>(elementSize(dtype));
  std::vector<int64_t> inBytes, outBytes;
  for (int64_t c : inCounts) inBytes.push_back(c * es);
  for (int64_t c : outCounts) outBytes.push_back(c * es);
  auto held = optionsFor<::gloo::AlltoallvOptions>(call);
  auto& o = *held;
  o.setInput(static_cast<uint8_t*>(const_cast<void*>(in)), inBytes);
  o.setOutput(static_cast<uint8_t*>(out), outBytes);
  ::gloo::alltoallv(o);
  call.retire(std::move(held));
}

void barrier(const Call& call) {
  auto held = optionsFor<::gloo::BarrierOptions>(call);
  auto& o = *held;
  ::gloo::barrier(o);
  call.retire(std::move(held));
}

}  // namespace commhost::gloo_backend
