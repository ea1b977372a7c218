// SPDX-License-Identifier: Apache-2.0
// One measurable op of `commhost bench`: buffers sized for a message, a run, and a
// verifiable fill/check (each rank can compute every other rank's data), following
// nccl-tests' conventions for what `size` means and the busbw factor.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "commhost/process_group.h"

namespace commhost::cli {

struct BenchParams {
  DeviceType device = DeviceType::CPU;  // where the tensors live (--device)
  DType dtype = DType::Float32;
  ReduceOp reduceOp;
  int root = 0;
  bool inPlace = true;
};

// Where the bench's tensors live: cpu memory, or the rank's GPU (bench_memory.h opens
// that one). fill() and check() work on host copies, so the ops' formulas are the same
// everywhere; the copies happen outside the timed loop.
class BenchMemory {
 public:
  virtual ~BenchMemory() = default;
  virtual Device device() const = 0;
  // `count` elements of `dtype`, contents unspecified, freed with the last view.
  virtual Tensor allocate(int64_t count, DType dtype) = 0;
  // The contents of `t` on the host (`t` itself for cpu memory), once the ops queued on
  // the caller's stream before it ended.
  virtual Tensor toHost(const Tensor& t) = 0;
  // Copies the host tensor `from` (as toHost returned it) into `to`.
  virtual void fromHost(const Tensor& from, Tensor& to) = 0;
  // Returns once everything queued on the caller's current stream ended: after a work's
  // wait(), the op itself (stream-ordered backends return from wait() before that).
  // Nothing to do for cpu memory.
  virtual void synchronize() = 0;
};
// Tensor::empty; toHost is the tensor itself.
std::unique_ptr<BenchMemory> cpuMemory();

class BenchOp {
 public:
  virtual ~BenchOp() = default;
  // Allocates buffers for a message of `bytes` (rounded down to whole elements per rank).
  virtual void prepare(int64_t bytes) = 0;
  virtual WorkPtr run() = 0;
  // Fills inputs with each rank's verifiable data; after run(), counts wrong elements.
  virtual void fill() = 0;
  virtual int64_t check() = 0;
  virtual int64_t size() const = 0;   // bytes, as nccl-tests reports them
  virtual int64_t count() const = 0;  // elements, as nccl-tests reports them
  virtual double busFactor() const = 0;
  // The bytes the dispatcher routes a call of this size by (ProcessGroup's per-op
  // tensor: one rank's block for allgather, reduce_scatter, gather and scatter); what a
  // route's byte range is compared with.
  virtual int64_t routedBytes() const { return size(); }
  virtual bool usesReduceOp() const { return false; }
  virtual bool usesRoot() const { return false; }
};

// "allreduce", "broadcast", "reduce", "allgather", "reduce_scatter", "alltoall",
// "gather", "scatter", "sendrecv", "barrier".
const std::vector<std::string>& benchOpNames();
// Throws InvalidArgument naming `name`, a "did you mean" and every known op unless it is one.
void requireBenchOp(const std::string& name);
// The ops a bench op issues (sendrecv: send and recv), what routes and manifests name.
std::vector<OpType> benchOpTypes(const std::string& name);
bool benchOpUsesReduceOp(const std::string& name);
// The op allocates, fills and checks its tensors through `memory`, which outlives it.
std::unique_ptr<BenchOp> makeBenchOp(const std::string& name, ProcessGroup& pg, const BenchParams& params,
                                     BenchMemory& memory);

}  // namespace commhost::cli
