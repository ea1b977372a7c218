// SPDX-License-Identifier: Apache-2.0
// Declares the `self` backend plugin.
#include "self_backend.h"

namespace {

const commhost::PluginDescriptor kDescriptor = {
    COMMHOST_DESCRIPTOR_PREFIX,
    commhost::PluginKind::Backend,
    "self",
    COMMHOST_VERSION,
    "Groups of one rank: every op completes inline (the ruler for host overhead)",
    {},
    commhost::self::kCapabilities,
    nullptr,
    commhost::self::create,
};

}  // namespace

COMMHOST_PLUGIN(kDescriptor)
