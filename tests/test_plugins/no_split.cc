// SPDX-License-Identifier: Apache-2.0
// The self backend without feature Split: a subgroup on it must be refused, naming it.
#include "../../plugins/self/self_backend.h"

namespace {

constexpr commhost::Capabilities noSplit() {
  commhost::Capabilities caps = commhost::self::kCapabilities;
  caps.features.remove(commhost::Feature::Split);
  return caps;
}

const commhost::PluginDescriptor kDescriptor = {
    COMMHOST_DESCRIPTOR_PREFIX,
    commhost::PluginKind::Backend,
    "nosplit",
    "1.0",
    "Test self backend that declares no subgroup support",
    {},
    noSplit(),
    nullptr,
    commhost::self::create,
};

}  // namespace

COMMHOST_PLUGIN(kDescriptor)
