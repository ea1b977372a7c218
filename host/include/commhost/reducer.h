// SPDX-License-Identifier: Apache-2.0
// Reducer: DDP's gradient bucketing (c10d's reducer.hpp) over a ProcessGroup.
//
// A training step calls prepareForBackward(), then markReady(i, grad) for each parameter
// as the backward pass produces its gradient (any order, any thread), then finalize().
// Gradients are packed into buckets; a bucket whose gradients are all in is handed to the
// comm hook at once, so the first buckets are on the wire while later gradients are still
// being computed. finalize() waits for every bucket and writes the reduced (averaged, with
// the default hook) gradients back into the tensors passed to markReady.
//
// Buckets: assigned by size per (dtype, device) in reverse parameter order, the first
// bucket capped at firstBucketCapBytes and the others at bucketCapBytes (c10d's
// compute_bucket_assignment_by_size). After the first iteration the buckets are rebuilt
// once, in the order gradients became ready on rank 0 (broadcast, so every rank agrees);
// never with staticGraph's second rebuild or when rebuildBuckets is false.
//
// Ranks must agree: the constructor checks, through the group, that every rank passed the
// same parameter list (count, shapes, dtypes, device types) and throws InvalidArgument
// naming the first differing parameter index and the ranks (c10d's
// verify_params_across_processes).
//
// Threading: prepareForBackward() and finalize() are called by the thread driving the
// step; markReady() may be called from any thread, concurrently. Communication is issued
// on the group in bucket-index order (every rank the same order, as the group requires),
// from whichever thread completes the bucket that is next in that order.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "commhost/export.h"
#include "commhost/sdk/comm_hook.h"
#include "commhost/tensor.h"

namespace commhost {

class ProcessGroup;

// What the Reducer needs to know of a parameter: its gradient has this shape and dtype.
struct ParamInfo {
  Shape shape;
  DType dtype = DType::Float32;
  Device device = Device::cpu();
  std::string name;  // for messages; "param N" when empty
};

struct ReducerOptions {
  int64_t bucketCapBytes = 25 * 1024 * 1024;      // c10d's bucket_cap_mb = 25
  int64_t firstBucketCapBytes = 1 * 1024 * 1024;  // c10d's first_bucket_bytes_cap
  // Gradients never marked in an iteration count as zero; which were used is agreed
  // across ranks by a bitmap allreduce, so a parameter unused on every rank is left
  // untouched. Without it, finalize() before every bucket was launched is an error.
  bool findUnusedParameters = false;
  // bucketView(i) is where parameter i's gradient lives: the workload writes its gradient
  // there, markReady(i, bucketView(i)) copies nothing and finalize() leaves the result in
  // place (c10d's gradient_as_bucket_view).
  bool gradientAsBucketView = false;
  // The set of used parameters and their ready order are the same every iteration: the
  // unused-parameter bitmap is agreed once, on the first iteration, and then reused.
  bool staticGraph = false;
  bool rebuildBuckets = true;  // rebuild once after the first iteration, in ready order
  // How each bucket is communicated. Required: makeCommHook(group) gives the one the
  // config names (hooks.gradient), or the average allreduce when it names none.
  std::shared_ptr<CommHook> hook;
};

// c10d's compute_bucket_assignment_by_size: bucket index -> parameter indices. Parameters
// are visited in `order` (default: reverse index order), grouped by (dtype, device);
// bucket k of a group closes when its bytes reach capsBytes[min(k, size-1)].
COMMHOST_API std::vector<std::vector<size_t>> computeBucketAssignmentBySize(const std::vector<ParamInfo>& params,
                                                                            const std::vector<int64_t>& capsBytes,
                                                                            const std::vector<size_t>& order = {});

// DDP's logging data for the last finished iteration, for tuning bucket sizes and hooks.
struct ReducerStats {
  uint64_t iteration = 0;                        // finished iterations so far
  bool rebuilt = false;                          // buckets were rebuilt after the first iteration
  std::vector<std::vector<size_t>> buckets;      // the current assignment
  std::vector<std::chrono::nanoseconds> ready;   // per parameter, from prepareForBackward; -1ns if unused
  std::vector<std::chrono::nanoseconds> launch;  // per bucket, when its hook was called
  std::vector<std::chrono::nanoseconds> comm;    // per bucket, from launch to its Future's completion
  std::chrono::nanoseconds backward{0};          // prepareForBackward to the last markReady
  std::chrono::nanoseconds finalizeWait{0};      // time finalize() spent waiting (communication not hidden)
  int64_t bytes = 0;                             // gradient bytes handed to the hook this iteration
};

class COMMHOST_API Reducer {
 public:
  // Collective over `group`: every rank constructs its Reducer with the same parameters.
  Reducer(std::shared_ptr<ProcessGroup> group, std::vector<ParamInfo> params, ReducerOptions options);
  ~Reducer();  // waits for communication still in flight
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  void prepareForBackward();
  // Parameter `index`'s gradient for this iteration. Throws InvalidArgument naming the
  // parameter when it was already marked, or when grad's shape, dtype or device differ
  // from the parameter's. `grad` must stay alive until finalize() returns.
  void markReady(size_t index, const Tensor& grad);
  // Waits for every bucket and writes the reduced gradients back (see the class comment).
  // Throws the hook's error, or InvalidArgument naming the parameters never marked
  // (without findUnusedParameters).
  void finalize();

  // Parameter `index`'s slot in its bucket, shaped like the parameter. Valid until the
  // buckets are rebuilt (after the first iteration): fetch it again every iteration.
  Tensor bucketView(size_t index) const;
  const ReducerStats& stats() const;  // the last finished iteration; call between steps
  size_t numParams() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace commhost
