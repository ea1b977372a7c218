// SPDX-License-Identifier: Apache-2.0
// Whether the nccl backend can run here: "" when the CUDA runtime sees a device, else
// the runtime's own reason. Never aborts without a driver (the runtime reports
// cudaErrorInsufficientDriver or cudaErrorNoDevice then).
#pragma once

#include <string>

namespace commhost::nccl_backend {

std::string probe();

}  // namespace commhost::nccl_backend
