// SPDX-License-Identifier: Apache-2.0
// Building blocks for comm-hook plugins (commhost/sdk/comm_hook.h): the average allreduce
// every hook falls back to, dtype casts for compression, and the 16-bit compression
// hook itself (the `fp16_compress` and `bf16_compress` plugins, and their use as
// wrappers). In libcommhost, so plugins share them instead of copying them.
//
// Threading: the futures returned complete on a backend thread; collectives are issued
// on the calling thread, which must be the one driving the group (see process_group.h).
#pragma once

#include <memory>

#include "commhost/errors.h"
#include "commhost/export.h"
#include "commhost/future.h"
#include "commhost/sdk/comm_hook.h"
#include "commhost/tensor.h"
#include "commhost/types.h"

namespace commhost::hooks {

// The context for a hook's errors on `bucket`: its group's name, rank and next seq (when
// the bucket has a group) and `op` (a literal: the hook's name), for raise(), so a hook
// error reads like every other ("[group G rank R] powersgd: ...").
COMMHOST_API ErrorContext hookContext(const GradBucket& bucket, const char* op);

// Sums `tensor` (contiguous, in place) over `group`, then divides by the group's size.
// The future's value is {tensor}. For f16/bf16 each rank's input is divided first (as
// c10d's fp16_compress_hook does), so a sum whose mean fits cannot overflow. A CUDA
// tensor is reduced with premul_sum(1/size) (avg for integers): the backend divides
// each input on the device.
COMMHOST_API FuturePtr allreduceAverage(ProcessGroup& group, Tensor tensor);
// Sums `tensor` in place over `group`; the future's value is {tensor}.
COMMHOST_API FuturePtr allreduceSum(ProcessGroup& group, Tensor tensor);

// A new tensor of `src`'s shape in `dtype` on src's device, each element converted (and
// multiplied by `factor`); f16/bf16 round to nearest even. A CUDA tensor is cast by the
// cast kernels (commhost/kernels/cast.h: f32 <-> f16/bf16, no factor, bit-exact with the
// CPU), on the calling thread's current stream, and the call returns once it is done;
// other casts of CUDA tensors throw NotSupportedError, and so does a build without CUDA.
COMMHOST_API Tensor castTo(const Tensor& src, DType dtype, double factor = 1.0);
// dst = src converted to dst's dtype (same element count and device; throws
// InvalidArgument otherwise). CUDA tensors as for castTo.
COMMHOST_API void copyCast(const Tensor& dst, const Tensor& src);

// `bucket` laid out over another flat buffer (e.g. its 16-bit copy): same index, offsets,
// parameters and shapes, the gradients views into `buffer`.
COMMHOST_API GradBucket rebucket(const GradBucket& bucket, Tensor buffer);

// The 16-bit compression hook (`wire` is Float16 or BFloat16): casts the bucket to
// `wire`, then runs `inner` on the 16-bit bucket (a wrapper, as c10d's
// fp16_compress_wrapper: PowerSGD then computes and sends its P and Q in 16 bit), or,
// when `inner` is null, averages it with allreduceAverage (c10d's fp16_compress_hook);
// then casts the result back into the bucket's buffer. State calls go to `inner`.
COMMHOST_API std::unique_ptr<CommHook> makeCompressHook(DType wire, std::shared_ptr<CommHook> inner);

}  // namespace commhost::hooks
