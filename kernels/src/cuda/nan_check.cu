// SPDX-License-Identifier: Apache-2.0
// The NaN check kernel: a grid-stride loop that sets a flag; no reduction is needed
// because every thread that sees a NaN writes the same value.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "commhost/kernels/nan_check.h"

namespace commhost::kernels {
namespace {

// The bit tests are exact for every width and need no device math library: a NaN has
// an all-ones exponent and a non-zero mantissa.
__device__ bool isNan(uint16_t bits, int exponentBits) {
  const int mantissaBits = 15 - exponentBits;
  const uint16_t exponentMask = static_cast<uint16_t>(((1u << exponentBits) - 1u) << mantissaBits);
  const uint16_t mantissaMask = static_cast<uint16_t>((1u << mantissaBits) - 1u);
  return (bits & exponentMask) == exponentMask && (bits & mantissaMask) != 0;
}

template <class T> __device__ bool nanAt(const T* data, int64_t i) { return data[i] != data[i]; }
struct Half16 {
  uint16_t bits;
};
struct BFloat16Bits {
  uint16_t bits;
};
template <> __device__ bool nanAt<Half16>(const Half16* data, int64_t i) { return isNan(data[i].bits, 5); }
template <> __device__ bool nanAt<BFloat16Bits>(const BFloat16Bits* data, int64_t i) { return isNan(data[i].bits, 8); }

template <class T> __global__ void nanCheckKernel(const T* data, int64_t count, int* flag) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    if (nanAt(data, i)) {
      *flag = 1;
      return;
    }
  }
}

template <class T> int launch(const void* data, int64_t count, int* flag, cudaStream_t stream) {
  constexpr int kThreads = 256;
  // Enough blocks to fill an H100 a few times over; the grid-stride loop covers the rest.
  const int64_t wanted = (count + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(wanted < 1024 ? wanted : 1024);
  nanCheckKernel<T><<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(data), count, flag);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int launchNanCheck(const void* data, int64_t count, DType dtype, int* flag, void* stream) {
  if (count <= 0) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case DType::Float16: return launch<Half16>(data, count, flag, s);
    case DType::BFloat16: return launch<BFloat16Bits>(data, count, flag, s);
    case DType::Float32: return launch<float>(data, count, flag, s);
    case DType::Float64: return launch<double>(data, count, flag, s);
    default: return 0;
  }
}

}  // namespace commhost::kernels
