// SPDX-License-Identifier: Apache-2.0
// stream_echo: an i64 allreduce that writes the OpContext's stream (as an integer) into
// element 0, so a test sees which stream the host handed the backend.
#include <cstdint>

#include "commhost/sdk/plugin.h"

namespace {
using namespace commhost;
constexpr Capabilities kCaps{
    {OpType::Allreduce}, {DType::Int64}, {ReduceOp::Sum}, {DeviceType::CPU}, {Feature::Split, Feature::MultiProcess}};
class StreamEcho final : public Backend {
 public:
  const Capabilities& capabilities() const override { return kCaps; }
  WorkPtr allreduce(const OpContext& ctx, Tensor& t, const AllreduceOptions&) override {
    t.data_as<int64_t>()[0] = static_cast<int64_t>(reinterpret_cast<intptr_t>(ctx.stream));
    return std::make_shared<CompletedWork>(ctx, std::vector<Tensor>{t});
  }
};
std::unique_ptr<Backend> create(const OptionValues&, const BackendContext&) { return std::make_unique<StreamEcho>(); }
const PluginDescriptor kDescriptor = {
    COMMHOST_DESCRIPTOR_PREFIX,
    PluginKind::Backend,
    "stream_echo",
    "1.0",
    "Test backend: echoes OpContext::stream",
    {},
    kCaps,
    nullptr,
    create,
};
}  // namespace

COMMHOST_PLUGIN(kDescriptor)
