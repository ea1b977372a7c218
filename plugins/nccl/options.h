// SPDX-License-Identifier: Apache-2.0
// The nccl backend's options (typed options schema) and the ncclConfig_t built from
// them. Device-independent: unit-tested without a GPU.
#pragma once

#include <nccl.h>

#include <chrono>
#include <string>

#include "commhost/sdk/typed_options.h"

namespace commhost::nccl_backend {

struct Options {
  bool highPriorityStream = false;
  bool blockingWait = false;
  bool nanCheck = false;
  bool enableTiming = false;
  bool eagerInit = false;
  std::chrono::milliseconds initTimeout{0};
  int cgaClusterSize = -1;
  int minCtas = -1;
  int maxCtas = -1;
  std::string netName;
  bool intraNode = false;
  static OptionSchema<Options> schema();
  void validate() const;  // min_ctas <= max_ctas when both are set
};

// A communicator's config: non-blocking (init and every call return at once; the
// backend polls ncclCommGetAsyncError), with the options' values where set and NCCL's
// own defaults (NCCL_CONFIG_UNDEF_*) elsewhere. The config points into `options`
// (net_name): keep it alive while the config is used.
ncclConfig_t configFor(const Options& options);

// The init timeout in force: init_timeout, or the group's timeout when it is 0s.
std::chrono::milliseconds initTimeout(const Options& options, std::chrono::milliseconds groupTimeout);

}  // namespace commhost::nccl_backend
