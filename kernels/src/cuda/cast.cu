// SPDX-License-Identifier: Apache-2.0
// The cast kernels: a grid-stride loop over dtype_storage.h's conversions, the very code the CPU
// runs (convertBuffer), so device and host round alike by construction.
#include <cuda_runtime.h>

#include "commhost/dtype_storage.h"
#include "commhost/kernels/cast.h"

namespace commhost::kernels {
namespace {

template <class D, class S> struct Cast;
template <> struct Cast<Float16, float> {
  __device__ static Float16 apply(float v) { return Float16::fromFloat(v); }
};
template <> struct Cast<BFloat16, float> {
  __device__ static BFloat16 apply(float v) { return BFloat16::fromFloat(v); }
};
template <> struct Cast<float, Float16> {
  __device__ static float apply(Float16 v) { return v.toFloat(); }
};
template <> struct Cast<float, BFloat16> {
  __device__ static float apply(BFloat16 v) { return v.toFloat(); }
};

template <class D, class S> __global__ void castKernel(D* dst, const S* src, int64_t count) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    dst[i] = Cast<D, S>::apply(src[i]);
}

template <class D, class S> int launch(void* dst, const void* src, int64_t count, cudaStream_t stream) {
  constexpr int kThreads = 256;
  // As the NaN check: enough blocks to fill an H100 a few times; the loop covers the rest.
  const int64_t wanted = (count + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(wanted < 1024 ? wanted : 1024);
  castKernel<D, S><<<blocks, kThreads, 0, stream>>>(static_cast<D*>(dst), static_cast<const S*>(src), count);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int launchCast(void* dst, DType dstType, const void* src, DType srcType, int64_t count, void* stream) {
  if (!canCastOnDevice(dstType, srcType)) return static_cast<int>(cudaErrorInvalidValue);
  if (count <= 0) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  if (srcType == DType::Float32)
    return dstType == DType::Float16 ? launch<Float16, float>(dst, src, count, s)
                                     : launch<BFloat16, float>(dst, src, count, s);
  return srcType == DType::Float16 ? launch<float, Float16>(dst, src, count, s)
                                   : launch<float, BFloat16>(dst, src, count, s);
}

}  // namespace commhost::kernels
