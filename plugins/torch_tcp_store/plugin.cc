// SPDX-License-Identifier: Apache-2.0
// Declares the `torch_tcp` store plugin: a client of torch's own TCPStore server.
#include "torch_tcp_store.h"

namespace {

const commhost::PluginDescriptor kDescriptor = {
    COMMHOST_DESCRIPTOR_PREFIX,
    commhost::PluginKind::Store,
    "torch_tcp",
    COMMHOST_VERSION,
    "Client of torch's TCPStore (torch 1.x or 2.x protocol): a torch job's store, for status or rendezvous",
    commhost::typedOptionSpecs<commhost::torchtcp::Options>(),
    {},
    nullptr,
    nullptr,
    commhost::typedStoreFactory<commhost::torchtcp::Options, &commhost::torchtcp::create>,
};

}  // namespace

COMMHOST_PLUGIN(kDescriptor)
