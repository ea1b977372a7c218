// SPDX-License-Identifier: Apache-2.0
// `noop`: returns the bucket unchanged without communicating, to measure what the
// Reducer costs without the network (c10d's noop_hook). Training with it does not
// average anything: for measurement only.
#include "commhost/sdk/comm_hook.h"
#include "commhost/sdk/plugin.h"

namespace {

class NoopHook final : public commhost::CommHook {
 public:
  commhost::FuturePtr runHook(commhost::GradBucket& bucket) override {
    return commhost::Future::completed({bucket.buffer});
  }
};

std::unique_ptr<commhost::CommHook> create(const commhost::OptionValues&, const commhost::CommHookContext&) {
  return std::make_unique<NoopHook>();
}

const commhost::PluginDescriptor kDescriptor = {
    COMMHOST_DESCRIPTOR_PREFIX,
    commhost::PluginKind::CommHook,
    "noop",
    "1.0",
    "Comm hook: return the bucket unchanged, no communication (for measuring the Reducer)",
    {},
    {},
    nullptr,
    nullptr,
    nullptr,
    create,
};

}  // namespace

COMMHOST_PLUGIN(kDescriptor)
