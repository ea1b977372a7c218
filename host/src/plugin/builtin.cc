// SPDX-License-Identifier: Apache-2.0
#include "builtin.h"

#include "commhost/errors.h"

namespace commhost {
namespace {

std::shared_ptr<Store> createHashStore(const OptionValues&, const StoreContext& ctx) {
  if (ctx.worldSize > 1)
    throw ConfigError("store 'hash' lives inside one process, but this job has " + std::to_string(ctx.worldSize) +
                      " ranks; use a networked store (store: { plugin: tcp }) for multi-process jobs");
  return std::make_shared<HashStore>(ctx.timeout);
}

const PluginDescriptor kHashStore = {
    COMMHOST_DESCRIPTOR_PREFIX,
    PluginKind::Store,
    "hash",
    COMMHOST_VERSION,
    "In-memory store for single-process jobs and tests",
    {},
    {},
    nullptr,
    nullptr,
    createHashStore,
    nullptr,
};

}  // namespace

std::vector<const PluginDescriptor*> builtinPlugins() { return {&kHashStore}; }

}  // namespace commhost
