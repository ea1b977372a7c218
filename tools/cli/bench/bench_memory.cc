// SPDX-License-Identifier: Apache-2.0
#include "bench_memory.h"

#include <dlfcn.h>

#include "commhost/errors.h"
#include "commhost/registry.h"

namespace commhost::cli {

DeviceType parseBenchDevice(const std::string& text) {
  if (text == "cpu") return DeviceType::CPU;
  if (text == "cuda") return DeviceType::CUDA;
  throw InvalidArgument("--device " + text +
                        ": want cpu or cuda (cuda: each rank's local GPU, LOCAL_RANK mod the visible devices)");
}

std::unique_ptr<BenchMemory> openBenchMemory(DeviceType device, int rank, int localRank) {
  if (device == DeviceType::CPU) return cpuMemory();
  const std::string who = "bench --device cuda (rank " + std::to_string(rank) + ", local rank " +
                          std::to_string(localRank) + ")";
#ifndef COMMHOST_BENCH_CUDA_MODULE
  throw InvalidArgument(who +
                        ": this commhost was built without CUDA (COMMHOST_WITH_CUDA=OFF), so it cannot measure "
                        "GPU tensors. Rebuild with -DCOMMHOST_WITH_CUDA=ON where the CUDA toolkit is, or use "
                        "--device cpu");
#else
  // Never closed: the tensors' deleters and the memory object live in it.
  // Installed beside libcommhost (build tree and install tree alike).
  const std::string path = libcommhostDirectory() + "/" COMMHOST_BENCH_CUDA_MODULE;
  void* module = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!module) {
    const char* why = ::dlerror();
    throw InvalidArgument(who + ": cannot load " + path + " (" + (why ? why : "unknown dlopen error") +
                          "). It needs the CUDA runtime (libcudart) on the library path; install the CUDA "
                          "toolkit's runtime, or use --device cpu");
  }
  using Open = BenchMemory* (*)(int, char*, size_t);
  const auto open = reinterpret_cast<Open>(::dlsym(module, "commhost_bench_cuda_open"));
  if (!open) throw InvalidArgument(who + ": " + path + " has no commhost_bench_cuda_open; reinstall commhost");
  char why[512] = {};
  BenchMemory* memory = open(localRank, why, sizeof why);
  if (!memory)
    throw InvalidArgument(who + ": no usable CUDA device: " + why +
                          ". Run it where the GPUs and their driver are (nvidia-smi lists them), or use --device cpu");
  return std::unique_ptr<BenchMemory>(memory);
#endif
}

}  // namespace commhost::cli
