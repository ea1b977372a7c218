// SPDX-License-Identifier: Apache-2.0
// `commhost bench --device cuda`'s memory: a module of its own (libcommhost_bench_cuda.so),
// the only part of the CLI linked to the CUDA runtime, which the bench opens with dlopen
// when --device cuda asks for it (bench_memory.cc). Every other command, `plugins list`
// included, so never loads the CUDA runtime and works where there is none.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

#include "bench_ops.h"
#include "commhost/errors.h"
#include "commhost/stream.h"

namespace commhost::cli {
namespace {

std::string cudaText(const char* call, cudaError_t e) {
  return std::string(call) + ": " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ")";
}

class CudaMemory final : public BenchMemory {
 public:
  explicit CudaMemory(int device) : device_(device) {}
  Device device() const override { return Device::cuda(device_); }

  Tensor allocate(int64_t count, DType dtype) override {
    const size_t bytes = static_cast<size_t>(count) * elementSize(dtype);
    void* p = nullptr;
    check("cudaMalloc of " + std::to_string(bytes) + " bytes", cudaMalloc(&p, bytes ? bytes : 1));
    const int device = device_;
    return Tensor::fromBlob(p, {count}, dtype, Device::cuda(device), std::shared_ptr<void>(p, [device](void* q) {
                              cudaSetDevice(device);
                              cudaFree(q);
                            }));
  }

  Tensor toHost(const Tensor& t) override {
    Tensor host = Tensor::empty(t.shape(), t.dtype());
    // On the caller's stream: after whatever the op queued there (its wait() did).
    const auto stream = static_cast<cudaStream_t>(currentStream());
    check("cudaMemcpyAsync to the host",
          cudaMemcpyAsync(host.data(), t.data(), t.nbytes(), cudaMemcpyDeviceToHost, stream));
    check("cudaStreamSynchronize", cudaStreamSynchronize(stream));
    return host;
  }

  void fromHost(const Tensor& from, Tensor& to) override {
    const auto stream = static_cast<cudaStream_t>(currentStream());
    check("cudaMemcpyAsync to the device",
          cudaMemcpyAsync(to.data(), from.data(), from.nbytes(), cudaMemcpyHostToDevice, stream));
    // `from` is pageable and freed when the caller returns: the copy must be done first.
    check("cudaStreamSynchronize", cudaStreamSynchronize(stream));
  }

  void synchronize() override {
    check("cudaStreamSynchronize", cudaStreamSynchronize(static_cast<cudaStream_t>(currentStream())));
  }

 private:
  void check(const std::string& what, cudaError_t e) const {
    if (e == cudaSuccess) return;
    (void)cudaGetLastError();
    throw BackendError("bench --device cuda on cuda:" + std::to_string(device_) + ": " + cudaText(what.c_str(), e) +
                       "; check the device (nvidia-smi) and that the message size fits its memory");
  }

  int device_;
};

}  // namespace
}  // namespace commhost::cli

// The module's one entry point: the memory of cuda:(localRank mod the visible devices),
// made current on the calling thread; or null with the CUDA runtime's reason in `why`.
extern "C" __attribute__((visibility("default"))) commhost::cli::BenchMemory* commhost_bench_cuda_open(int localRank,
                                                                                                       char* why,
                                                                                                       size_t whySize) {
  const auto fail = [&](const std::string& text) -> commhost::cli::BenchMemory* {
    std::snprintf(why, whySize, "%s", text.c_str());
    return nullptr;
  };
  int count = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess)
    return fail(commhost::cli::cudaText("cudaGetDeviceCount", e));
  if (count <= 0)
    return fail("cudaGetDeviceCount: no CUDA-capable device is detected (none visible: CUDA_VISIBLE_DEVICES?)");
  const int device = localRank % count;
  if (const cudaError_t e = cudaSetDevice(device); e != cudaSuccess)
    return fail(commhost::cli::cudaText(("cudaSetDevice(" + std::to_string(device) + ")").c_str(), e));
  return new commhost::cli::CudaMemory(device);
}
