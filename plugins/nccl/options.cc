// SPDX-License-Identifier: Apache-2.0
#include "options.h"

namespace commhost::nccl_backend {

OptionSchema<Options> Options::schema() {
  return OptionSchema<Options>()
      .option("high_priority_stream", &Options::highPriorityStream, "false",
              "Run NCCL kernels on high-priority streams (cudaStreamCreateWithPriority), ahead of compute kernels")
      .option("blocking_wait", &Options::blockingWait, "false",
              "false: wait() makes the caller's stream wait for the op and returns at once; true: wait() blocks "
              "the CPU until the op ends or times out (then aborts the communicators), like "
              "TORCH_NCCL_BLOCKING_WAIT")
      .option("nan_check", &Options::nanCheck, "false",
              "Check floating-point inputs for NaN before each collective and fail the op naming the tensor")
      .option("enable_timing", &Options::enableTiming, "false",
              "Time each op on the device (CUDA events with timing right before and after its NCCL calls), so "
              "the flight recorder (device_ms) and completion hooks show it; as TORCH_NCCL_ENABLE_TIMING. Off: "
              "untimed events, which cost less")
      .option("eager_init", &Options::eagerInit, "false",
              "Create the communicator of the current CUDA device when the group is created, not on first use")
      .option("init_timeout", &Options::initTimeout, "0s",
              "How long communicator creation may take (unique-id exchange and NCCL's init); 0s: the group's timeout",
              {0, 86400 * 7})
      .option("cga_cluster_size", &Options::cgaClusterSize, "-1",
              "CGA cluster size of NCCL kernels (sm_90 and newer); -1: NCCL's default", {-1, 8})
      .option("min_ctas", &Options::minCtas, "-1", "Fewest CTAs (channels) NCCL uses; -1: NCCL's default", {-1, 64})
      .option("max_ctas", &Options::maxCtas, "-1", "Most CTAs (channels) NCCL uses; -1: NCCL's default", {-1, 64})
      .option("net_name", &Options::netName, "", "NCCL network module to use (e.g. IB, Socket); empty: NCCL's choice")
      .option("intra_node", &Options::intraNode, "false",
              "Allreduce of bf16/f16/f32 sum/avg/premul_sum up to 10 MiB through commhost's one-shot (up to 256 KiB) "
              "and two-shot kernels over peer GPU memory, when every rank of the group is on one host with its own "
              "GPU and all GPUs are linked pairwise by NVLink (checked at communicator creation; otherwise, and for "
              "every other allreduce, NCCL runs it)");
}

void Options::validate() const {
  // 0 is meaningless for either count; -1 is NCCL's default.
  if (minCtas == 0) refuseOption("min_ctas", "must be -1 (NCCL's default) or 1 to 64, not 0");
  if (maxCtas == 0) refuseOption("max_ctas", "must be -1 (NCCL's default) or 1 to 64, not 0");
  if (minCtas > 0 && maxCtas > 0 && minCtas > maxCtas)
    refuseOption("min_ctas", "is " + std::to_string(minCtas) + ", more than max_ctas (" + std::to_string(maxCtas) +
                                 "); make min_ctas <= max_ctas");
}

ncclConfig_t configFor(const Options& options) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  if (options.cgaClusterSize >= 0) config.cgaClusterSize = options.cgaClusterSize;
  if (options.minCtas > 0) config.minCTAs = options.minCtas;
  if (options.maxCtas > 0) config.maxCTAs = options.maxCtas;
  if (!options.netName.empty()) config.netName = options.netName.c_str();
  return config;
}

std::chrono::milliseconds initTimeout(const Options& options, std::chrono::milliseconds groupTimeout) {
  return options.initTimeout.count() > 0 ? options.initTimeout : groupTimeout;
}

}  // namespace commhost::nccl_backend
