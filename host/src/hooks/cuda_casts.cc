// SPDX-License-Identifier: Apache-2.0
// libcommhost_cuda_casts.so: the hook SDK's casts of CUDA tensors (device_casts.h), the
// only part of the hook SDK linked to the CUDA runtime, opened by libcommhost on demand.
#include <cuda_runtime.h>

#include "commhost/errors.h"
#include "commhost/kernels/cast.h"
#include "commhost/stream.h"
#include "device_casts.h"

namespace commhost::hooks {
namespace {

void check(const std::string& what, cudaError_t e, int device) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();
  throw BackendError(what + " on cuda:" + std::to_string(device) + " failed: " + cudaGetErrorString(e) + " (" +
                     cudaGetErrorName(e) + "); check the device (nvidia-smi) and that the tensors live on it");
}

// Makes `device` current for a scope (throwing with CUDA's reason when it cannot be),
// then restores the previous one.
class DeviceScope {
 public:
  DeviceScope(int device, const std::string& what) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device) check(what + " (cudaSetDevice)", cudaSetDevice(device), device);
  }
  ~DeviceScope() {
    int now = -1;
    cudaGetDevice(&now);
    if (now != previous_ && previous_ >= 0) cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = -1;
};

class CudaCasts final : public DeviceCasts {
 public:
  Tensor castTo(const Tensor& src, DType dtype) override {
    const int device = src.device().index;
    const std::string what = "cast of " + src.str() + " to " + dtypeName(dtype);
    DeviceScope scope(device, what);
    void* p = nullptr;
    const size_t bytes = static_cast<size_t>(src.numel()) * elementSize(dtype);
    check(what + " (cudaMalloc of " + std::to_string(bytes) + " bytes)", cudaMalloc(&p, bytes ? bytes : 1), device);
    Tensor out = Tensor::fromBlob(p, src.shape(), dtype, src.device(), std::shared_ptr<void>(p, [](void* q) {
                                    // No current device needed: with unified addressing the
                                    // pointer names its own.
                                    cudaFree(q);
                                  }));
    run(out, src, what);
    return out;
  }

  void copyCast(const Tensor& dst, const Tensor& src) override {
    const std::string what = "cast of " + src.str() + " into " + dst.str();
    DeviceScope scope(dst.device().index, what);
    run(dst, src, what);
  }

 private:
  // Launches on the current stream, then waits for it: the cast is done when this returns.
  static void run(const Tensor& dst, const Tensor& src, const std::string& what) {
    const auto stream = currentStream();
    const int launched = kernels::launchCast(dst.data(), dst.dtype(), src.data(), src.dtype(), src.numel(), stream);
    check(what, static_cast<cudaError_t>(launched), dst.device().index);
    check(what + " (cudaStreamSynchronize)", cudaStreamSynchronize(static_cast<cudaStream_t>(stream)),
          dst.device().index);
  }
};

}  // namespace
}  // namespace commhost::hooks

extern "C" __attribute__((visibility("default"))) commhost::hooks::DeviceCasts* commhost_cuda_casts() {
  static commhost::hooks::CudaCasts casts;
  return &casts;
}
