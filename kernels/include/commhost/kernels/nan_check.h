// SPDX-License-Identifier: Apache-2.0
// NaN check on device memory (commhost_kernels_cuda, built only with COMMHOST_WITH_CUDA):
// what the nccl backend's `nan_check` option runs on every floating-point input before
// the collective, as c10d's checkForNan does.
//
// The check is queued on `stream` and never synchronises: the kernel sets *flag (a
// device int the caller zeroed on the same stream) to 1 if any of the `count`
// elements is a NaN. The caller copies the flag back when it needs the answer.
#pragma once

#include <cstdint>

#include "commhost/types.h"

namespace commhost::kernels {

// True for the dtypes that can hold a NaN (f16, bf16, f32, f64); others need no check.
constexpr bool canHoldNan(DType dtype) { return isFloating(dtype); }

// Queues the check of `count` elements of `dtype` at `data` (device memory) on `stream`
// (a cudaStream_t). Returns the cudaError_t of the launch as an int (0: queued). A dtype
// without NaNs queues nothing and returns 0.
int launchNanCheck(const void* data, int64_t count, DType dtype, int* flag, void* stream);

}  // namespace commhost::kernels
