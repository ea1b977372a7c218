// SPDX-License-Identifier: Apache-2.0
#include "probe.h"

#include <cuda_runtime.h>

namespace commhost::nccl_backend {

std::string probe() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    // The error is sticky for this thread's next cudaGetLastError; clear it so a later
    // caller does not read it as its own.
    (void)cudaGetLastError();
    return cudaGetErrorString(e);
  }
  if (count == 0) return "no CUDA-capable device is detected";
  return "";
}

}  // namespace commhost::nccl_backend
