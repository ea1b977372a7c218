// SPDX-License-Identifier: Apache-2.0
// Another plugin named "self": the loader must refuse the second one of a name.
#include "../../plugins/self/self_backend.h"

namespace {

const commhost::PluginDescriptor kDescriptor = {
    COMMHOST_DESCRIPTOR_PREFIX,
    commhost::PluginKind::Backend,
    "self",
    "9.9",
    "Test duplicate of the self plugin",
    {},
    commhost::self::kCapabilities,
    nullptr,
    commhost::self::create,
};

}  // namespace

COMMHOST_PLUGIN(kDescriptor)
