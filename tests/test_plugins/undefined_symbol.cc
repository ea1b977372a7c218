// SPDX-License-Identifier: Apache-2.0
// A plugin that calls a C++ function nothing defines (a forgotten source file, a library
// not linked): dlopen refuses it, and the loader names the function demangled.
#include "commhost/sdk/plugin.h"

namespace commhost_test {
// Declared with default visibility so the linker leaves the reference for load time.
__attribute__((visibility("default"))) int forgottenHelper(const std::string& name, int rank);
}  // namespace commhost_test

namespace {

std::unique_ptr<commhost::Backend> create(const commhost::OptionValues&, const commhost::BackendContext&) {
  return commhost_test::forgottenHelper("x", 0) == 7 ? nullptr : nullptr;
}

const commhost::PluginDescriptor kDescriptor = {
    COMMHOST_DESCRIPTOR_PREFIX,
    commhost::PluginKind::Backend,
    "undefsym",
    "1.0",
    "Test plugin with an undefined C++ symbol",
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
