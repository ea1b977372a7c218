// SPDX-License-Identifier: Apache-2.0
// A backend built with -D_GLIBCXX_USE_CXX11_ABI=0 that calls into libcommhost with a
// std::string (as every real backend does, through raise() or Backend's virtuals): dlopen
// fails on the pre-C++11 std::string symbol before the build fingerprint can be read. The
// loader must say it is the dual-ABI mismatch, not just "undefined symbol".
#include "commhost/errors.h"
#include "commhost/plugin.h"

namespace {

std::unique_ptr<commhost::Backend> create(const commhost::OptionValues&, const commhost::BackendContext&) {
  commhost::raise(commhost::ErrorCode::Plugin, commhost::ErrorContext{}, "never reached", "refused at load");
}

const commhost::PluginDescriptor kDescriptor = {
    COMMHOST_DESCRIPTOR_PREFIX,
    commhost::PluginKind::Backend,
    "oldabicall",
    "1.0",
    "Test plugin built with _GLIBCXX_USE_CXX11_ABI=0 that calls libcommhost",
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
