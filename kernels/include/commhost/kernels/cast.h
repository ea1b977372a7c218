// SPDX-License-Identifier: Apache-2.0
// f32 <-> f16 and f32 <-> bf16 casts of device memory (commhost_kernels_cuda, built only
// with COMMHOST_WITH_CUDA): what the comm-hook SDK's castTo/copyCast run on CUDA tensors
// (the fp16_compress and bf16_compress hooks).
//
// Bit-exact with the CPU conversions (commhost/dtype_storage.h), because the kernels
// run that same code: round to nearest even; a NaN becomes the quiet NaN of its sign
// (f16 0x7e00, bf16 the input's top half with the quiet bit set); f32 beyond f16's range
// becomes inf; f16/bf16 -> f32 is exact. tests/gpu/cast_gpu_test.cc checks every 16-bit
// pattern and a spread of floats against the CPU.
#pragma once

#include <cstdint>

#include "commhost/dtype_storage.h"  // canCastOnDevice
#include "commhost/types.h"

namespace commhost::kernels {

// Queues dst[i] = src[i] converted, for i < count, on `stream` (a cudaStream_t; null: the
// legacy default stream); dst and src are device memory of their dtypes and must not
// overlap. Returns the cudaError_t of the launch as an int (0: queued), or
// cudaErrorInvalidValue for a pair canCastOnDevice refuses (nothing queued).
int launchCast(void* dst, DType dstType, const void* src, DType srcType, int64_t count, void* stream);

}  // namespace commhost::kernels
