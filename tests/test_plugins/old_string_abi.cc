// SPDX-License-Identifier: Apache-2.0
// A plugin built with -D_GLIBCXX_USE_CXX11_ABI=0 (CMakeLists.txt) while commhost uses 1:
// same ABI version and the same sizeof(PluginDescriptor), but std::string, and with it
// BackendContext, StoreContext and OptionSpec, have another layout. The loader must
// refuse it from its build fingerprint. It calls nothing in libcommhost, so without
// that check it would load (a function taking std::string would not even link).
#include "commhost/plugin.h"

namespace {

std::unique_ptr<commhost::Backend> create(const commhost::OptionValues&, const commhost::BackendContext&) {
  return nullptr;  // never reached: refused at load
}

const commhost::PluginDescriptor kDescriptor = {
    COMMHOST_DESCRIPTOR_PREFIX,
    commhost::PluginKind::Backend,
    "oldstringabi",
    "1.0",
    "Test plugin built with _GLIBCXX_USE_CXX11_ABI=0",
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
