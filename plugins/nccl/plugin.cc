// SPDX-License-Identifier: Apache-2.0
// Declares the `nccl` backend plugin.
#include "nccl_backend.h"
#include "probe.h"

namespace {

const commhost::PluginDescriptor kDescriptor = {
    COMMHOST_DESCRIPTOR_PREFIX,
    commhost::PluginKind::Backend,
    "nccl",
    COMMHOST_VERSION,
    "Every collective on CUDA tensors over NCCL (one communicator and stream per device)",
    commhost::typedOptionSpecs<commhost::nccl_backend::Options>(),
    commhost::nccl_backend::capabilities(),
    &commhost::nccl_backend::probe,
    commhost::typedBackendFactory<commhost::nccl_backend::Options, &commhost::nccl_backend::create>,
};

}  // namespace

COMMHOST_PLUGIN(kDescriptor)
