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
  DType dtype = DType::Float32;
  ReduceOp reduceOp;
  int root = 0;
  bool inPlace = true;
};

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
std::unique_ptr<BenchOp> makeBenchOp(const std::string& name, ProcessGroup& pg, const BenchParams& params);

}  // namespace commhost::cli
