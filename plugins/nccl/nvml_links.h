// SPDX-License-Identifier: Apache-2.0
// A device's NVLinks through NVML, loaded with dlopen("libnvidia-ml.so.1") when first
// asked (no link-time NVML dependency: the plugin loads where the driver's NVML is
// missing, and intra_node then reports the topology as unknown).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "intra_setup.h"

namespace commhost::nccl_backend {

// The NVLinks of the GPU with PCI bus id `busId` (active links only, in link order), or
// nullopt with *why ("libnvidia-ml.so.1 not found: ...", "nvmlInit_v2 failed: 3").
std::optional<std::vector<NvLinkEnd>> readNvLinks(const std::string& busId, std::string* why);

}  // namespace commhost::nccl_backend
