// SPDX-License-Identifier: Apache-2.0
// Declares the `file` store plugin.
#include "file_store.h"

namespace {

const commhost::PluginDescriptor kDescriptor = {
    COMMHOST_DESCRIPTOR_PREFIX,
    commhost::PluginKind::Store,
    "file",
    COMMHOST_VERSION,
    "Key-value store in one append-only file on a shared filesystem (fcntl record locks)",
    commhost::typedOptionSpecs<commhost::filestore::Options>(),
    {},
    nullptr,
    nullptr,
    commhost::typedStoreFactory<commhost::filestore::Options, &commhost::filestore::create>,
};

}  // namespace

COMMHOST_PLUGIN(kDescriptor)
