// SPDX-License-Identifier: Apache-2.0
// A plugin built for a future ABI major: the loader must refuse it before reading more.
#include "commhost/sdk/plugin.h"

extern "C" __attribute__((visibility("default"))) const commhost::PluginHeader commhost_plugin_header = {
    commhost::kPluginMagic, COMMHOST_ABI_MAJOR + 1, 0, sizeof(commhost::PluginDescriptor), nullptr};
