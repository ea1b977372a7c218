// SPDX-License-Identifier: Apache-2.0
// Plugins built with -D_GLIBCXX_USE_CXX11_ABI=0 (CMakeLists.txt) while commhost uses 1:
// same ABI version and the same sizeof(PluginDescriptor), but std::string, and with it
// BackendContext, StoreContext and OptionSpec, have another layout.
//   oldstringabi calls nothing in libcommhost, so it loads: the loader must refuse it from
//     its build fingerprint.
//   oldabicall (OLD_ABI_CALLS_COMMHOST) calls libcommhost with a std::string, as every real
//     backend does (raise(), Backend's virtuals): dlopen fails on the pre-C++11 std::string
//     symbol before the fingerprint can be read, and the loader must name the dual-ABI
//     mismatch, not just "undefined symbol".
#include "commhost/errors.h"
#include "commhost/sdk/plugin.h"

namespace {

#ifdef OLD_ABI_CALLS_COMMHOST
constexpr const char* kName = "oldabicall";
constexpr const char* kDescription = "Test plugin built with _GLIBCXX_USE_CXX11_ABI=0 that calls libcommhost";
#else
constexpr const char* kName = "oldstringabi";
constexpr const char* kDescription = "Test plugin built with _GLIBCXX_USE_CXX11_ABI=0";
#endif

std::unique_ptr<commhost::Backend> create(const commhost::OptionValues&, const commhost::BackendContext&) {
#ifdef OLD_ABI_CALLS_COMMHOST
  commhost::raise(commhost::ErrorCode::Plugin, commhost::ErrorContext{}, "never reached", "refused at load");
#else
  return nullptr;  // never reached: refused at load
#endif
}

const commhost::PluginDescriptor kDescriptor = {
    COMMHOST_DESCRIPTOR_PREFIX,
    commhost::PluginKind::Backend,
    kName,
    "1.0",
    kDescription,
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
