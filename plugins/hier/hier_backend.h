// SPDX-License-Identifier: Apache-2.0
// The hier backend: collectives in two levels, composed of two configured backends. An
// `intra` backend (e.g. shm) serves the ranks of each host, an `inter` backend (e.g.
// gloo) one leader per host (its lowest rank). allreduce = reduce to the leader inside
// each host, allreduce among the leaders, broadcast inside each host; broadcast, allgather
// and reduce-scatter are built the same way. Hosts may hold different numbers of ranks;
// with one host everything runs on `intra` alone, and a host of one rank skips it.
//
// The parts are real backends of the same config, created through
// BackendContext::makeBackend over subgroups of this group (per-host groups "<group>/intraH",
// the leaders' group "<group>/inter"); no new transport. A part's errors reach the caller
// with this group's context, the step that failed, and a lost peer renamed to its rank in
// this group (so the supervisor names the right rank).
//
// Threading: calls come from the group's thread in seq order; each op runs on the
// backend's one WorkQueue worker, which issues the op's steps to the parts and waits for
// each in turn, so the parts see one caller each, in an order every rank shares. The
// parts' step counters (Part::seq) are touched only by that worker. abort() and
// shutdown() may come from any thread: they go to the queue and to both parts.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "commhost/sdk/plugin.h"
#include "commhost/sdk/typed_options.h"
#include "commhost/sdk/work_queue.h"
#include "topology.h"

namespace commhost::hier {

// The manifest: every op the backend can build from its parts (fewer at run time when a
// part lacks a step, see HierBackend::capabilities()).
const Capabilities& capabilities();

struct Options {
  std::string intra;        // the backend (a key under `backends:`) for the ranks of one host
  std::string inter;        // the backend for one leader per host
  int groupSize = 0;        // 0: hosts by host identity; N: groups of N ranks act as hosts
  bool roundRobin = false;  // with groupSize: rank r in group r mod ceil(world / N), not blocks
  static OptionSchema<Options> schema();
  void validate() const;
};
std::unique_ptr<Backend> create(const Options& options, const BackendContext& ctx);

// One of the two levels, as this rank sees it.
struct Part {
  std::string role;                  // "intra" or "inter", for messages
  std::string backendName;           // the configured name (options.intra / options.inter)
  std::shared_ptr<Backend> backend;  // null where this rank takes no part (one-rank host, non-leader)
  std::vector<int> members;          // its ranks, as ranks of this group
  std::string group;                 // its group's name
  int rank = -1;                     // this rank in it
  uint64_t seq = 0;                  // steps issued so far (the worker's only)
  bool active() const { return backend != nullptr; }
};

class HierBackend final : public Backend {
 public:
  HierBackend(const Options& options, const BackendContext& ctx);
  ~HierBackend() override;
  // What the parts let it do, the same on every rank (agreed through the store).
  const Capabilities& capabilities() const override { return caps_; }

  WorkPtr allreduce(const OpContext& op, Tensor& tensor, const AllreduceOptions& opts) override;
  WorkPtr allreduceCoalesced(const OpContext& op, std::vector<Tensor>& tensors,
                             const AllreduceCoalescedOptions& opts) override;
  WorkPtr broadcast(const OpContext& op, Tensor& tensor, const BroadcastOptions& opts) override;
  WorkPtr allgather(const OpContext& op, std::vector<Tensor>& outputs, const Tensor& input,
                    const AllgatherOptions& opts) override;
  WorkPtr allgatherIntoTensor(const OpContext& op, Tensor& output, const Tensor& input,
                              const AllgatherOptions& opts) override;
  WorkPtr reduceScatter(const OpContext& op, Tensor& output, const std::vector<Tensor>& inputs,
                        const ReduceScatterOptions& opts) override;
  WorkPtr reduceScatterTensor(const OpContext& op, Tensor& output, const Tensor& input,
                              const ReduceScatterOptions& opts) override;
  WorkPtr barrier(const OpContext& op, const BarrierOptions& opts) override;

  void abort(const std::string& reason) override;
  void shutdown() override;

  const Topology& topology() const { return topo_; }

 private:
  using Issue = std::function<WorkPtr(Backend&, const OpContext&)>;
  // Runs one step on `part` (active on this rank) for the op `parent`, and waits for it
  // until the op's deadline. A failure is rethrown in this group's terms (see describe).
  void step(Part& part, OpType op, const OpContext& parent, const Issue& issue);
  // The ops' algorithms (ops.cc), run on the worker.
  void runAllreduce(const OpContext& op, Tensor& tensor, const ReduceOp& reduceOp);
  void runBroadcast(const OpContext& op, Tensor& tensor, int root);
  void runAllgather(const OpContext& op, Tensor& output, const Tensor& input);
  // `blockFor(rank)` is the input block meant for that rank (output.numel() elements).
  void runReduceScatter(const OpContext& op, Tensor& output, const std::function<Tensor(int)>& blockFor,
                        const ReduceOp& reduceOp);
  void runBarrier(const OpContext& op);
  // Reduces `tensor` (sum-like `sum`) to the host's leader: intra reduce, or intra
  // allreduce where the part lacks reduce.
  void reduceToLeader(const OpContext& op, Tensor& tensor, const ReduceOp& sum);
  // Refuses an op the parts cannot build (not in caps_), naming the part that lacks a step.
  void require(const OpContext& op) const;
  void agreeCapabilities();  // constructor: fills caps_, missing_ and intraReduce_
  std::exception_ptr describe(const OpContext& op, std::exception_ptr error) const;

  BackendContext ctx_;  // copied, without makeBackend (valid during the factory call only)
  Topology topo_;
  int host_ = 0;   // this rank's host
  int local_ = 0;  // this rank's index within it
  Part intra_;
  Part inter_;
  Capabilities caps_;
  OpType intraReduce_ = OpType::Reduce;             // Reduce, or Allreduce where the intra part lacks it
  std::string missing_;                             // why ops of the manifest are absent from caps_ ("" when none is)
  std::chrono::steady_clock::time_point deadline_;  // the running op's; the worker's only
  // The first step failure (but InvalidArgument, which every rank meets alike): after it
  // the parts' step counters may disagree across ranks, so every later op is refused.
  // The worker's only.
  std::string broken_;
  std::atomic<bool> aborted_{false};  // set by abort() (any thread), read by the worker
  // Declared last: destroyed first, so no job runs once the parts go.
  std::unique_ptr<WorkQueue> queue_;
};

}  // namespace commhost::hier
