// SPDX-License-Identifier: Apache-2.0
// Backend: the interface a backend plugin implements, one virtual per operation.
//
// Contract:
// - The ProcessGroup has validated every argument (devices, dtypes, sizes, roots, peers)
//   against the group, and the route table sends a backend only the (op, device, dtype,
//   reduce op) its Capabilities list; a backend does not repeat those checks.
// - Every call returns at once with a Work; the work runs on the backend's own threads
//   (or completes inline). Calls come from one thread per group, in seq order, the same
//   order on every rank.
// - Tensors passed in stay valid until the work completes (the caller keeps them alive).
//   The OpContext is valid during the call only (the host fills the same object for the
//   group's next call): a work or job that outlives the call keeps a copy, as Work does.
// - abort() fails every work in flight with AbortedError and makes later calls throw;
//   shutdown() waits for works in flight, then releases resources. Both may be called
//   from any thread, and more than once.
// - Errors are thrown (or set on the work) as commhost::Error subclasses, built with
//   raise(code, ErrorContext::of(ctx), what, hint): the host fills group, rank, op and seq
//   in every OpContext. A PeerLostError whose ErrorContext names the peer ("(peer N)",
//   Error::where().peer) tells the supervisor that peer is gone: name it only when the
//   backend knows (e.g. its process exited).
// - An op run inline (inside the call) may wait for peers; if the supervisor finds a
//   peer lost meanwhile, it calls abort() from its own thread to end that wait.
//
// Partial backends: override only the ops you implement and declare exactly those in
// the plugin's Capabilities (the manifest). Routes are checked against the manifest when
// the config loads, so the other ops go to another backend (`backend: [mine, gloo]`).
// An op left at its default throws NotSupportedError naming the backend and the op; the
// host reaches it only if the manifest declares an op the class does not override.
// abort() and shutdown() default to doing nothing, which is right only for a backend
// whose ops complete inside the call without waiting on peers (the ProcessGroup refuses
// calls after an abort itself). A backend with threads, works in flight, or calls that
// wait on peers (store waits, sockets) overrides abort() to end those waits, else a lost
// peer leaves the call blocked until its own timeout.
//
// Subgroups: prepareSplit() (optional, see below) lets a backend take part in creating a
// subgroup on every rank of its group, so the subgroup's backend can start from its state
// (as the nccl backend does with ncclCommSplit).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "commhost/export.h"
#include "commhost/options.h"
#include "commhost/sdk/abi.h"
#include "commhost/sdk/capabilities.h"
#include "commhost/tensor.h"
#include "commhost/work.h"

namespace commhost {

// SplitRequest::color of a rank that joins none of a round's subgroups (the value of
// NCCL_SPLIT_NOCOLOR).
constexpr int kNoColor = -1;

// One round of subgroup creation (ProcessGroup::newGroup, or one split call, which may
// create a subgroup per color) as one rank of the parent group takes part in it. Filled
// by the host; valid during the call only. It starts with the prefix abi.h explains: a
// minor version may append fields.
struct SplitRequest {
  uint32_t size = sizeof(SplitRequest);
  uint32_t magic = kSplitRequestMagic;
  uint32_t abiVersion = kAbiVersion;
  const char* op = "new_group";  // "new_group" or "split" (static storage), for error messages
  // Names the round, equal on every rank of the parent group and never reused in its life
  // ("sub1", "split2"): a key for the backend's own exchange through its store.
  std::string round;
  // This rank's subgroup: its name ("main/sub1", "main/split2c0"), its color (>= 0: equal
  // on its members, different for each subgroup of the round), this rank's rank in it
  // (members are ordered by split's key, then by rank in the parent), and its members as
  // ranks of the parent group, in subgroup rank order. A rank in none of the round's
  // subgroups gets "", kNoColor, -1 and no members.
  std::string group;
  int color = kNoColor;
  int rank = -1;
  std::vector<int> members;
  std::chrono::milliseconds timeout{0};  // how long a wait for the parent's other ranks may take (group.timeout)
};

class COMMHOST_API Backend {
 public:
  virtual ~Backend() = default;
  // The manifest: the same Capabilities as the plugin's descriptor (or fewer).
  virtual const Capabilities& capabilities() const = 0;

  virtual WorkPtr allreduce(const OpContext& ctx, Tensor& tensor, const AllreduceOptions& opts);
  virtual WorkPtr allreduceCoalesced(const OpContext& ctx, std::vector<Tensor>& tensors,
                                     const AllreduceCoalescedOptions& opts);
  virtual WorkPtr broadcast(const OpContext& ctx, Tensor& tensor, const BroadcastOptions& opts);
  virtual WorkPtr reduce(const OpContext& ctx, Tensor& tensor, const ReduceOptions& opts);
  // outputs has one tensor per rank.
  virtual WorkPtr allgather(const OpContext& ctx, std::vector<Tensor>& outputs, const Tensor& input,
                            const AllgatherOptions& opts);
  // output holds world_size * input.numel() elements, rank-major.
  virtual WorkPtr allgatherIntoTensor(const OpContext& ctx, Tensor& output, const Tensor& input,
                                      const AllgatherOptions& opts);
  // outputs[i] has one tensor per rank for inputs[i].
  virtual WorkPtr allgatherCoalesced(const OpContext& ctx, std::vector<std::vector<Tensor>>& outputs,
                                     const std::vector<Tensor>& inputs, const AllgatherOptions& opts);
  // outputs: one per rank on the root, empty elsewhere.
  virtual WorkPtr gather(const OpContext& ctx, std::vector<Tensor>& outputs, const Tensor& input,
                         const GatherOptions& opts);
  // inputs: one per rank on the root, empty elsewhere.
  virtual WorkPtr scatter(const OpContext& ctx, Tensor& output, const std::vector<Tensor>& inputs,
                          const ScatterOptions& opts);
  // inputs: one per rank; rank r receives the reduction of every rank's inputs[r].
  virtual WorkPtr reduceScatter(const OpContext& ctx, Tensor& output, const std::vector<Tensor>& inputs,
                                const ReduceScatterOptions& opts);
  // input holds world_size * output.numel() elements.
  virtual WorkPtr reduceScatterTensor(const OpContext& ctx, Tensor& output, const Tensor& input,
                                      const ReduceScatterOptions& opts);
  virtual WorkPtr alltoall(const OpContext& ctx, std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                           const AlltoallOptions& opts);
  // Split sizes are already resolved: one entry per rank, in rows of dimension 0.
  virtual WorkPtr alltoallSingle(const OpContext& ctx, Tensor& output, const Tensor& input,
                                 const AlltoallSingleOptions& opts);
  virtual WorkPtr barrier(const OpContext& ctx, const BarrierOptions& opts);
  virtual WorkPtr send(const OpContext& ctx, const Tensor& tensor, int dst, const SendOptions& opts);
  virtual WorkPtr recv(const OpContext& ctx, Tensor& tensor, int src, const RecvOptions& opts);
  virtual WorkPtr recvAnySource(const OpContext& ctx, Tensor& tensor, const RecvOptions& opts);

  virtual void abort(const std::string& reason);
  virtual void shutdown();

  // Subgroups, optional. ProcessGroup::newGroup and split call it on every rank of this
  // backend's group, members of the new subgroups and the other ranks alike, once per
  // round, after the ranks agreed on the members and before any of the round's subgroup
  // backends exists; from the group's calling thread, so in the same order on every rank
  // (the group's backends in config order). A backend whose subgroups can start from its
  // own state with a collective over the whole parent group (ncclCommSplit, which every
  // rank of the parent communicator calls) does that here and returns what it made: on
  // this rank the host hands it to the factory of the subgroup's backend of the same name
  // (the same plugin and options: the subgroup is built from the parent's current config)
  // as BackendContext::splitFrom, and drops it on a rank in no subgroup. Throw a
  // commhost::Error to fail the round on this rank (newGroup/split throws it); anything
  // else thrown becomes a PluginError naming the backend. The default prepares nothing
  // and returns null: the subgroup's backend starts on its own.
  virtual std::shared_ptr<void> prepareSplit(const SplitRequest& request);

  // No data members: the host calls a backend only through this table of virtual
  // functions, so what libcommhost keeps about a backend (its config name, ...) lives in
  // the host, and a plugin's objects never depend on its layout. A backend that needs its
  // config name keeps BackendContext::backendName.

 protected:
  // Throws NotSupportedError "<context>backend 'NAME' does not implement OP" for ctx's op
  // (NAME: the config name the host created it as; "this backend" for one it did not).
  [[noreturn]] void notSupported(const OpContext& ctx) const;
};

}  // namespace commhost
