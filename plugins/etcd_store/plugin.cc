// SPDX-License-Identifier: Apache-2.0
// Declares the `etcd` store plugin.
#include "etcd_store.h"

namespace {

const commhost::PluginDescriptor kDescriptor = {
    COMMHOST_DESCRIPTOR_PREFIX,
    commhost::PluginKind::Store,
    "etcd",
    COMMHOST_VERSION,
    "Key-value store in an etcd v3 cluster (JSON gateway over HTTP); outlives any rank",
    commhost::typedOptionSpecs<commhost::etcdstore::Options>(),
    {},
    nullptr,
    nullptr,
    commhost::typedStoreFactory<commhost::etcdstore::Options, &commhost::etcdstore::create>,
};

}  // namespace

COMMHOST_PLUGIN(kDescriptor)
