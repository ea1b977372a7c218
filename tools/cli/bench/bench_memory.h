// SPDX-License-Identifier: Apache-2.0
// Opens the memory `commhost bench --device` asks for. cuda memory comes from a module
// linked to the CUDA runtime (libcommhost_bench_cuda.so, next to libcommhost), opened
// only here, so a machine without CUDA runs every other command; a build without CUDA
// (COMMHOST_WITH_CUDA=OFF) has no such module and says so.
#pragma once

#include <memory>

#include "bench_ops.h"

namespace commhost::cli {

// "cpu" or "cuda" (the rank's local GPU: LOCAL_RANK mod the visible devices, as torchrun
// users expect); throws InvalidArgument for anything else, naming both.
DeviceType parseBenchDevice(const std::string& text);

// cpu: cpuMemory(). cuda: the rank's GPU, made current on this thread. Throws
// InvalidArgument naming `rank`, the device and why it cannot be used (a build without
// CUDA; the module or the CUDA runtime missing; the CUDA runtime's reason, such as no
// device or no driver) and what to do.
std::unique_ptr<BenchMemory> openBenchMemory(DeviceType device, int rank, int localRank);

}  // namespace commhost::cli
