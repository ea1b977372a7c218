// SPDX-License-Identifier: Apache-2.0
// CommHook: how the Reducer communicates one bucket of gradients (DDP's comm hooks).
//
// runHook() starts communication for the bucket and returns a Future that completes
// with the bucket's reduced flat buffer (one tensor). It is called from the thread that
// drives the Reducer; the Future may complete on any thread. The hook must not keep the
// bucket's tensors beyond the Future's completion.
//
// State: a hook that keeps state across iterations (PowerSGD's error feedback and warm
// start) saves it with saveState() and a new hook created with the same options continues
// from it after loadState(), so a resumed job computes what the interrupted one would
// have. Optional, in the style of Gloo's rendezvous store: a stateless hook inherits the
// defaults (hasState() false; saveState/loadState throw NotSupportedError).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "commhost/errors.h"
#include "commhost/export.h"
#include "commhost/future.h"
#include "commhost/tensor.h"

namespace commhost {

class ProcessGroup;

struct GradBucket {
  size_t index = 0;
  Tensor buffer;                  // the flat gradients of this bucket
  std::vector<Tensor> gradients;  // views into `buffer`, one per parameter, shaped like it
  std::vector<int64_t> offsets;   // element offset of each gradient in `buffer`
  std::vector<size_t> params;     // the Reducer's parameter index of each gradient
  bool isLast = false;            // the last bucket of this iteration
  ProcessGroup* group = nullptr;  // the group to communicate over
};

class CommHook {
 public:
  virtual ~CommHook() = default;
  virtual FuturePtr runHook(GradBucket& bucket) = 0;

  // Whether saveState() has anything to save.
  virtual bool hasState() const { return false; }
  // The hook's state as bytes (a format of the hook's own). Call between iterations, with
  // no bucket in flight.
  virtual std::vector<uint8_t> saveState() const {
    throw NotSupportedError("this comm hook keeps no state to save (hasState() is false)");
  }
  // Restores what saveState() returned, into a hook created with the same plugin and
  // options; throws InvalidArgument when the bytes are not such a state.
  virtual void loadState(const std::vector<uint8_t>& state) {
    (void)state;
    throw NotSupportedError("this comm hook keeps no state to load (hasState() is false)");
  }
};

// The comm hook the group's config names under hooks.<name> (with its wrapper, if any),
// created for `group`; the built-in average allreduce (plugin `allreduce`) when the config
// names none. Throws ConfigError / PluginError saying what to fix.
COMMHOST_API std::shared_ptr<CommHook> makeCommHook(ProcessGroup& group, const std::string& name = "gradient");

}  // namespace commhost
