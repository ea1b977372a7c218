// SPDX-License-Identifier: Apache-2.0
// Declares the `shm` backend plugin.
#include "shm_backend.h"

namespace {

const commhost::PluginDescriptor kDescriptor = {
    COMMHOST_DESCRIPTOR_PREFIX,
    commhost::PluginKind::Backend,
    "shm",
    COMMHOST_VERSION,
    "CPU collectives between the processes (or threads) of one host through POSIX shared memory",
    commhost::typedOptionSpecs<commhost::shm::Options>(),
    commhost::shm::capabilities(),
    nullptr,
    commhost::typedBackendFactory<commhost::shm::Options, &commhost::shm::create>,
};

}  // namespace

COMMHOST_PLUGIN(kDescriptor)
