// SPDX-License-Identifier: Apache-2.0
// A backend whose factory always throws: group creation must report it with the path.
#include <stdexcept>

#include "commhost/sdk/plugin.h"

namespace {

std::unique_ptr<commhost::Backend> create(const commhost::OptionValues&, const commhost::BackendContext&) {
  throw std::runtime_error("cannot open device /dev/nonexistent");
}

const commhost::PluginDescriptor kDescriptor = {
    COMMHOST_DESCRIPTOR_PREFIX,
    commhost::PluginKind::Backend,
    "throwing",
    "1.0",
    "Test plugin whose factory throws",
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
