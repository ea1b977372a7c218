// SPDX-License-Identifier: Apache-2.0
// A backend built against a copy of commhost's headers in which Backend declares one more
// virtual function, before allreduce (edit_headers.cmake makes the copy): every layout the
// build fingerprint records matches commhost's, but each vtable slot from allreduce on is
// one further down. Loaded, the host's allreduce would call addedElsewhere(). The loader
// must refuse it by its interface hashes (abi.h) before calling anything in it.
#include "commhost/sdk/plugin.h"

namespace {

class OtherVtableBackend final : public commhost::Backend {
 public:
  const commhost::Capabilities& capabilities() const override { return caps_; }
  void addedElsewhere() override {}  // only in the edited headers

 private:
  commhost::Capabilities caps_;
};

std::unique_ptr<commhost::Backend> create(const commhost::OptionValues&, const commhost::BackendContext&) {
  return std::make_unique<OtherVtableBackend>();  // never reached: refused at load
}

const commhost::PluginDescriptor kDescriptor = {
    COMMHOST_DESCRIPTOR_PREFIX,
    commhost::PluginKind::Backend,
    "othervtable",
    "1.0",
    "Test plugin built against headers whose Backend has one more virtual function",
    {},
    {commhost::Capabilities::allOps(),
     commhost::Capabilities::allDTypes(),
     commhost::Capabilities::allReduceOps(),
     {commhost::DeviceType::CPU},
     {}},
    nullptr,
    create,
};

}  // namespace

COMMHOST_PLUGIN(kDescriptor)
