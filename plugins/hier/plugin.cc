// SPDX-License-Identifier: Apache-2.0
// Declares the `hier` backend plugin.
#include "hier_backend.h"

namespace {

const commhost::PluginDescriptor kDescriptor = {
    COMMHOST_DESCRIPTOR_PREFIX,
    commhost::PluginKind::Backend,
    "hier",
    COMMHOST_VERSION,
    "Two-level collectives: an intra backend inside each host, an inter backend among one leader per host",
    commhost::typedOptionSpecs<commhost::hier::Options>(),
    commhost::hier::capabilities(),
    nullptr,
    commhost::typedBackendFactory<commhost::hier::Options, &commhost::hier::create>,
};

}  // namespace

COMMHOST_PLUGIN(kDescriptor)
