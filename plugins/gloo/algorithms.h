// SPDX-License-Identifier: Apache-2.0
// The collectives on one Gloo context, blocking, on the calling (worker) thread.
// Buffers are raw memory with an element count and dtype; the backend maps tensors.
// Gloo errors propagate as gloo exceptions; the backend describes them.
#pragma once

#include <gloo/context.h>

#include <chrono>
#include <memory>
#include <vector>

#include "commhost/types.h"
#include "retired.h"

namespace commhost::gloo_backend {

enum class AllreduceAlgorithm { Auto, Ring, Bcube };

// One op's Gloo context, tag (equal on every rank) and deadline, and where its Gloo
// buffers go once it has succeeded (see retired.h).
struct Call {
  std::shared_ptr<::gloo::Context> context;
  uint32_t tag;
  std::chrono::milliseconds timeout;
  std::shared_ptr<Retired> retired;
  int rank() const { return context->rank; }
  int size() const { return context->size; }
  void retire(std::shared_ptr<void> finished) const { retired->keep(std::move(finished)); }
};

struct Buffer {
  void* data;
  size_t count;  // elements
  DType dtype;
  size_t bytes() const { return count * elementSize(dtype); }
};

// In place. Avg and PreMulSum are a sum followed by the final scale.
void allreduce(const Call& call, Buffer buf, const ReduceOp& op, AllreduceAlgorithm algorithm, int64_t ringThreshold);
// In place; the result is defined on the root only.
void reduce(const Call& call, Buffer buf, const ReduceOp& op, int root);
void broadcast(const Call& call, Buffer buf, int root);
// out holds size() * in.count elements, rank-major.
void allgather(const Call& call, Buffer in, void* out);
// out (root only) holds size() * in.count elements.
void gather(const Call& call, Buffer in, void* out, int root);
// ins (root only): one pointer per rank to out.count elements each.
void scatter(const Call& call, const std::vector<void*>& ins, Buffer out, int root);
// Element counts per rank; in and out are contiguous.
void alltoallv(const Call& call, const void* in, const std::vector<int64_t>& inCounts, void* out,
               const std::vector<int64_t>& outCounts, DType dtype);
void barrier(const Call& call);

}  // namespace commhost::gloo_backend
