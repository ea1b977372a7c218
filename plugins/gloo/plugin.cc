// SPDX-License-Identifier: Apache-2.0
// Declares the `gloo` backend plugin.
#include "gloo_backend.h"

namespace {

const commhost::PluginDescriptor kDescriptor = {
    COMMHOST_DESCRIPTOR_PREFIX,
    commhost::PluginKind::Backend,
    "gloo",
    COMMHOST_VERSION,
    "Every collective on CPU over Gloo's TCP transport (multi-process, multi-host)",
    commhost::typedOptionSpecs<commhost::gloo_backend::Options>(),
    commhost::gloo_backend::capabilities(),
    nullptr,
    commhost::typedBackendFactory<commhost::gloo_backend::Options, &commhost::gloo_backend::create>,
    nullptr,  // not a store
    nullptr,  // not a comm hook
    nullptr,  // no wrap name
    commhost::typedOptionCheck<commhost::gloo_backend::Options>,
};

}  // namespace

COMMHOST_PLUGIN(kDescriptor)
