// SPDX-License-Identifier: Apache-2.0
// The `template` backend: allreduce and broadcast for any number of ranks, moving every
// byte through the group's Store. Slow on purpose and simple to trust: a
// skeleton whose transport (the Store calls in template_backend.cc) a real backend
// replaces with its own.
//
// What the host guarantees (see commhost/sdk/backend.h): every argument was validated against
// the group and against kCapabilities before a call, calls for one group come from one
// thread in seq order, and tensors stay alive until the returned Work completes.
// Ops it does not implement are routed to another backend by the config.
#pragma once

#include <memory>
#include <string>

#include "commhost/errors.h"
#include "commhost/sdk/backend.h"
#include "commhost/sdk/plugin.h"
#include "commhost/sdk/typed_options.h"

namespace commhost::templ {

// The options a user may set under `backends.<name>.options`, declared once: schema()
// binds each key to its member (the type follows from the member) with its default,
// description and range. The host validates the YAML against it before the factory
// runs, and the factory receives this struct filled in (see commhost/sdk/typed_options.h).
struct Options {
  int threads = 1;
  bool verbose = false;
  static OptionSchema<Options> schema() {
    return OptionSchema<Options>()
        .option("threads", &Options::threads, "1", "Worker threads for the transport (the template only records it)",
                {1, 64})
        .option("verbose", &Options::verbose, "false", "Log every operation at info level");
  }
  // Optional: rules that span several options (or depend on the group) go here, run
  // when the backend is created; refuse with refuseOption(key, what, hint).
  void validate(const BackendContext&) const {}
};

// The manifest: what the host routes here. Declare exactly what you implement: the
// config's routes are resolved against it when it loads, so every other op, device,
// dtype and reduce op goes to the next backend a route lists (`backend: [t, gloo]`) and
// never reaches this one.
inline constexpr Capabilities kCapabilities = {
    {OpType::Allreduce, OpType::Broadcast},  // ops
    {DType::Float32, DType::Float64},        // dtypes
    {ReduceOp::Sum, ReduceOp::Max},          // reduce ops
    {DeviceType::CPU},                       // devices
    // features the host checks: Split (subgroups), MultiProcess (ranks as processes),
    // MultiHost (ranks on several hosts). The store carries every byte, so all three hold.
    {Feature::Split, Feature::MultiProcess, Feature::MultiHost},
};

// Overrides only the ops it declares; the others keep Backend's default, which throws
// NotSupportedError naming the backend and the op. Every op completes inside its call
// and has no threads to stop, so Backend's default shutdown() suffices. Its ops wait on
// the store, bounded by the op's timeout; the default abort() does not end such a wait
// early, so a real transport overrides abort() to cancel its waits (see commhost/sdk/backend.h).
class TemplateBackend final : public Backend {
 public:
  TemplateBackend(const BackendContext& ctx, const Options& options);

  const Capabilities& capabilities() const override { return kCapabilities; }
  WorkPtr allreduce(const OpContext& ctx, Tensor& tensor, const AllreduceOptions& opts) override;
  WorkPtr broadcast(const OpContext& ctx, Tensor& tensor, const BroadcastOptions& opts) override;

 private:
  // The transport: publishes this rank's contribution to op ctx.seq (its byte count,
  // then its bytes if withData), waits for every peer's, and checks that every rank
  // passed the same byte count (and that dataFrom, or every peer when dataFrom < 0,
  // sent its bytes); ranks that disagree all get an InvalidArgument naming both ranks
  // and sizes, never a wrong result. Returns the peers' posts, indexed by rank.
  std::vector<Bytes> exchange(const OpContext& ctx, const Tensor& tensor, bool withData, int dataFrom);

  BackendContext ctx_;  // rank, world size, the store private to this backend, logger
  Options options_;
  uint64_t lastSeq_ = 0;  // this rank's previous op through this backend (seqs have gaps)
};

// The factory, wrapped in the descriptor by typedBackendFactory<Options, &create>:
// `options` holds every option (defaults filled in, validate() passed); `ctx` says where
// the backend sits. Throw ConfigError/PluginError to refuse.
std::unique_ptr<Backend> create(const Options& options, const BackendContext& ctx);

}  // namespace commhost::templ
