// SPDX-License-Identifier: Apache-2.0
// partial: a backend that overrides allreduce and barrier only, at world size 1 (where
// an allreduce leaves the tensor as it is). Its manifest declares every op, but only
// cpu, f32 and sum: the tests route around it by dtype, reduce op and ordered backend
// lists, and the ops it claims without overriding them are the author's mistake that
// Backend's defaults turn into a NotSupportedError naming the backend and the op.
#include "commhost/sdk/plugin.h"

namespace {

using namespace commhost;

constexpr Capabilities kCaps{
    Capabilities::allOps(), {DType::Float32}, {ReduceOp::Sum}, {DeviceType::CPU}, {Feature::Split}};

class PartialBackend final : public Backend {
 public:
  const Capabilities& capabilities() const override { return kCaps; }
  WorkPtr allreduce(const OpContext& ctx, Tensor& t, const AllreduceOptions&) override {
    return std::make_shared<CompletedWork>(ctx, std::vector<Tensor>{t});
  }
  WorkPtr barrier(const OpContext& ctx, const BarrierOptions&) override {
    return std::make_shared<CompletedWork>(ctx, std::vector<Tensor>{});
  }
};

std::unique_ptr<Backend> create(const OptionValues&, const BackendContext& ctx) {
  if (ctx.worldSize != 1) throw PluginError("the partial test backend serves world size 1 only");
  return std::make_unique<PartialBackend>();
}

const PluginDescriptor kDescriptor = {
    COMMHOST_DESCRIPTOR_PREFIX,
    PluginKind::Backend,
    "partial",
    "1.0",
    "Test backend that implements allreduce and barrier (its manifest claims every op)",
    {},
    kCaps,
    nullptr,
    create,
};

}  // namespace

COMMHOST_PLUGIN(kDescriptor)
