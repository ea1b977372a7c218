// SPDX-License-Identifier: Apache-2.0
// A backend whose availability probe fails, as a GPU backend's would on a CPU-only host.
#include "commhost/plugin.h"

namespace {

std::string probe() { return "no CUDA device visible (test plugin)"; }

std::unique_ptr<commhost::Backend> create(const commhost::OptionValues&, const commhost::BackendContext&) {
  return nullptr;  // never called: the host refuses unavailable plugins
}

const commhost::PluginDescriptor kDescriptor = {
    COMMHOST_DESCRIPTOR_PREFIX,
    commhost::PluginKind::Backend,
    "probed",
    "1.0",
    "Test plugin that is never available",
    {},
    {commhost::Capabilities::allOps(),
     commhost::Capabilities::allDTypes(),
     commhost::Capabilities::allReduceOps(),
     {commhost::DeviceType::CUDA},
     {}},
    probe,
    create,
};

}  // namespace

COMMHOST_PLUGIN(kDescriptor)
