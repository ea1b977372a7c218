// SPDX-License-Identifier: Apache-2.0
// Internal: plugins compiled into libcommhost (the in-memory hash store).
#pragma once

#include <vector>

#include "commhost/sdk/plugin.h"

namespace commhost {
std::vector<const PluginDescriptor*> builtinPlugins();
}  // namespace commhost
