// SPDX-License-Identifier: Apache-2.0
// A backend whose availability probe fails, as a GPU backend's would on a CPU-only host.
// Built twice: probed (cuda tensors) and, with PROBED_CPU, probedcpu (cpu tensors: listed
// first in a route beside a backend that runs here, for the fallback tests).
#include "commhost/sdk/plugin.h"

namespace {

std::string probe() { return "no CUDA device visible (test plugin)"; }

std::unique_ptr<commhost::Backend> create(const commhost::OptionValues&, const commhost::BackendContext&) {
  return nullptr;  // never called: the host refuses unavailable plugins
}

const commhost::PluginDescriptor kDescriptor = {
    COMMHOST_DESCRIPTOR_PREFIX,
    commhost::PluginKind::Backend,
#ifdef PROBED_CPU
    "probedcpu",
#else
    "probed",
#endif
    "1.0",
    "Test plugin that is never available",
    {},
    {commhost::Capabilities::allOps(),
     commhost::Capabilities::allDTypes(),
     commhost::Capabilities::allReduceOps(),
#ifdef PROBED_CPU
     {commhost::DeviceType::CPU},
#else
     {commhost::DeviceType::CUDA},
#endif
     {}},
    probe,
    create,
};

}  // namespace

COMMHOST_PLUGIN(kDescriptor)
