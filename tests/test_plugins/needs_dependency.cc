// SPDX-License-Identifier: Apache-2.0
// A plugin whose own dependency is missing at load time: listed as unavailable.
#include "commhost/sdk/plugin.h"

extern "C" int commhost_test_dependency_value();

namespace {

std::unique_ptr<commhost::Backend> create(const commhost::OptionValues&, const commhost::BackendContext&) {
  return commhost_test_dependency_value() == 7 ? nullptr : nullptr;
}

const commhost::PluginDescriptor kDescriptor = {
    COMMHOST_DESCRIPTOR_PREFIX,
    commhost::PluginKind::Backend,
    "needsdep",
    "1.0",
    "Test plugin with a missing dependency",
    {},
    {commhost::Capabilities::allOps(),
     commhost::Capabilities::allDTypes(),
     commhost::Capabilities::allReduceOps(),
     {commhost::DeviceType::CPU},
     {}},
    nullptr,
    create,
};

}  // namespace

COMMHOST_PLUGIN(kDescriptor)
