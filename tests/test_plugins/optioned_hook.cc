// SPDX-License-Identifier: Apache-2.0
// A comm hook with one option, for the hooks: table's option checks and variables
// (COMMHOST_HOOKS_<NAME>_OPTIONS_<KEY>). Only configs are loaded with it: it is never run.
#include "commhost/errors.h"
#include "commhost/sdk/comm_hook.h"
#include "commhost/sdk/plugin.h"

namespace {

std::unique_ptr<commhost::CommHook> create(const commhost::OptionValues&, const commhost::CommHookContext&) {
  throw commhost::PluginError("the optionedhook test plugin only declares options; it is never created");
}

const commhost::PluginDescriptor kDescriptor = {
    COMMHOST_DESCRIPTOR_PREFIX,
    commhost::PluginKind::CommHook,
    "optionedhook",
    "1.0",
    "Test comm hook declaring one option",
    {{"factor", commhost::OptionType::Double, "1", "scale applied to the bucket", {}, 0.001, 1000}},
    {},
    nullptr,
    nullptr,
    nullptr,
    create,
};

}  // namespace

COMMHOST_PLUGIN(kDescriptor)
