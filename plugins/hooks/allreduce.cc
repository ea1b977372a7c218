// SPDX-License-Identifier: Apache-2.0
// `allreduce`: c10d's default comm hook. Sums the bucket over the group and divides by
// its size (the average DDP needs), through the SDK's allreduceAverage.
#include "commhost/sdk/hook_sdk.h"
#include "commhost/sdk/plugin.h"

namespace {

class AllreduceHook final : public commhost::CommHook {
 public:
  commhost::FuturePtr runHook(commhost::GradBucket& bucket) override {
    if (!bucket.group) throw commhost::InvalidArgument("allreduce hook: bucket has no group");
    return commhost::hooks::allreduceAverage(*bucket.group, bucket.buffer);
  }
};

std::unique_ptr<commhost::CommHook> create(const commhost::OptionValues&, const commhost::CommHookContext&) {
  return std::make_unique<AllreduceHook>();
}

const commhost::PluginDescriptor kDescriptor = {
    COMMHOST_DESCRIPTOR_PREFIX,
    commhost::PluginKind::CommHook,
    "allreduce",
    "1.0",
    "Comm hook: average the bucket over the group (sum, then divide); the default",
    {},
    {},
    nullptr,
    nullptr,
    nullptr,
    create,
};

}  // namespace

COMMHOST_PLUGIN(kDescriptor)
