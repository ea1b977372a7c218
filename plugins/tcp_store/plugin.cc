// SPDX-License-Identifier: Apache-2.0
// Declares the `tcp` store plugin: the embedded default store of multi-rank jobs.
#include "tcp_store.h"

namespace {

const commhost::PluginDescriptor kDescriptor = {
    COMMHOST_DESCRIPTOR_PREFIX,
    commhost::PluginKind::Store,
    "tcp",
    COMMHOST_VERSION,
    "Key-value store over TCP; rank 0 hosts the server (or `commhost store serve`)",
    commhost::typedOptionSpecs<commhost::tcpstore::Options>(),
    {},
    nullptr,
    nullptr,
    commhost::typedStoreFactory<commhost::tcpstore::Options, &commhost::tcpstore::create>,
};

}  // namespace

COMMHOST_PLUGIN(kDescriptor)
