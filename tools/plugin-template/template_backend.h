// SPDX-License-Identifier: Apache-2.0
// The `template` backend: allreduce, broadcast and barrier for any number of ranks,
// moving every byte through the group's Store. Slow on purpose and simple to trust: a
// skeleton whose transport (the Store calls in template_backend.cc) a real backend
// replaces with its own.
//
// What the host guarantees (see commhost/backend.h): every argument was validated against
// the group and against kCapabilities before a call, calls for one group come from one
// thread in seq order, and tensors stay alive until the returned Work completes.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "commhost/backend.h"
#include "commhost/errors.h"
#include "commhost/plugin.h"
#include "commhost/typed_options.h"

namespace commhost::templ {

// The options a user may set under `backends.<name>.options`, declared once: schema()
// binds each key to its member (the type follows from the member) with its default,
// description and range. The host validates the YAML against it before the factory
// runs, and the factory receives this struct filled in (see commhost/typed_options.h).
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

// The manifest the host checks routes and calls against. Declare only what you
// implement: when the config loads, the dispatcher refuses any route that would send
// this backend another op or device, and before each call the ProcessGroup refuses
// another dtype or reduce op, so none of them reaches the backend.
inline constexpr Capabilities kCapabilities = {
    {OpType::Allreduce, OpType::Broadcast, OpType::Barrier},  // ops
    {DType::Float32, DType::Float64},                         // dtypes
    {ReduceOp::Sum, ReduceOp::Max},                           // reduce ops
    {DeviceType::CPU},                                        // devices
    // features the host checks: Split (subgroups), MultiProcess (ranks as processes),
    // MultiHost (ranks on several hosts). The store carries every byte, so all three hold.
    {Feature::Split, Feature::MultiProcess, Feature::MultiHost},
};

class TemplateBackend final : public Backend {
 public:
  TemplateBackend(const BackendContext& ctx, int64_t threads, bool verbose);

  const Capabilities& capabilities() const override { return kCapabilities; }

  // Implemented.
  WorkPtr allreduce(const OpContext& ctx, Tensor& tensor, const AllreduceOptions& opts) override;
  WorkPtr broadcast(const OpContext& ctx, Tensor& tensor, const BroadcastOptions& opts) override;
  WorkPtr barrier(const OpContext& ctx, const BarrierOptions& opts) override;

  // Not declared in kCapabilities, so the host never routes them here; each throws
  // InvalidArgument if called directly.
  WorkPtr allreduceCoalesced(const OpContext& ctx, std::vector<Tensor>& tensors,
                             const AllreduceCoalescedOptions& opts) override;
  WorkPtr reduce(const OpContext& ctx, Tensor& tensor, const ReduceOptions& opts) override;
  WorkPtr allgather(const OpContext& ctx, std::vector<Tensor>& outputs, const Tensor& input,
                    const AllgatherOptions& opts) override;
  WorkPtr allgatherIntoTensor(const OpContext& ctx, Tensor& output, const Tensor& input,
                              const AllgatherOptions& opts) override;
  WorkPtr allgatherCoalesced(const OpContext& ctx, std::vector<std::vector<Tensor>>& outputs,
                             const std::vector<Tensor>& inputs, const AllgatherOptions& opts) override;
  WorkPtr gather(const OpContext& ctx, std::vector<Tensor>& outputs, const Tensor& input,
                 const GatherOptions& opts) override;
  WorkPtr scatter(const OpContext& ctx, Tensor& output, const std::vector<Tensor>& inputs,
                  const ScatterOptions& opts) override;
  WorkPtr reduceScatter(const OpContext& ctx, Tensor& output, const std::vector<Tensor>& inputs,
                        const ReduceScatterOptions& opts) override;
  WorkPtr reduceScatterTensor(const OpContext& ctx, Tensor& output, const Tensor& input,
                              const ReduceScatterOptions& opts) override;
  WorkPtr alltoall(const OpContext& ctx, std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                   const AlltoallOptions& opts) override;
  WorkPtr alltoallSingle(const OpContext& ctx, Tensor& output, const Tensor& input,
                         const AlltoallSingleOptions& opts) override;
  WorkPtr send(const OpContext& ctx, const Tensor& tensor, int dst, const SendOptions& opts) override;
  WorkPtr recv(const OpContext& ctx, Tensor& tensor, int src, const RecvOptions& opts) override;
  WorkPtr recvAnySource(const OpContext& ctx, Tensor& tensor, const RecvOptions& opts) override;

  // Every op completes inside its call (on the caller's thread), so there is never
  // anything in flight to cancel or wait for. A backend with its own threads fails its AsyncWorks with AbortedError
  // in abort(), and joins its threads in shutdown(); both may be called more than once.
  void abort(const std::string& reason) override;
  void shutdown() override;

 private:
  // Throws AbortedError after abort(); logs the op when `verbose` is set.
  void begin(const OpContext& ctx) const;
  // The transport: publishes this rank's contribution to op ctx.seq (its byte count,
  // then its bytes if withData), waits for every peer's, and checks that every rank
  // passed the same byte count (and that dataFrom, or every peer when dataFrom < 0,
  // sent its bytes); ranks that disagree all get an InvalidArgument naming both ranks
  // and sizes, never a wrong result. Returns the peers' posts, indexed by rank.
  std::vector<Bytes> exchange(const OpContext& ctx, const Tensor& tensor, bool withData, int dataFrom);
  std::string key(uint64_t seq, int rank) const;

  BackendContext ctx_;  // rank, world size, the store private to this backend, logger
  int64_t threads_;
  bool verbose_;
  uint64_t lastSeq_ = 0;              // this rank's previous op through this backend (seqs have gaps)
  std::atomic<bool> aborted_{false};  // abort() may come from any thread
};

// The factory, wrapped in the descriptor by typedBackendFactory<Options, &create>:
// `options` holds every option (defaults filled in, validate() passed); `ctx` says where
// the backend sits. Throw ConfigError/PluginError to refuse.
std::unique_ptr<Backend> create(const Options& options, const BackendContext& ctx);

}  // namespace commhost::templ
