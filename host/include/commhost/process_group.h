// SPDX-License-Identifier: Apache-2.0
// ProcessGroup: the collective API applications call.
//
// A group validates every call (devices, dtypes, sizes, roots, peers) and throws
// InvalidArgument naming the group, rank, op and seq before anything is sent; then it
// gives the call the group's next sequence number, picks the backend through the route
// table and returns the backend's Work.
//
// Threading: calls on one group come from one thread at a time, in the same order on
// every rank of the group (as with c10d). Different groups may be driven from different
// threads. Works may be waited on from any thread. With debug.check_collectives a call
// made while another thread's call on the group is in progress is refused
// (InvalidArgument naming both threads and ops; nothing sent).
//
// Lifetime: a group owns its backends. Destroying it (or shutdown()) waits for works in
// flight; abort() fails them at once, so every waiter returns, but a backend thread
// already blocked inside a transport (Gloo) stays there until that transport's own
// timeout, and destroying the group waits for it.
//
// Hot swap: reconfigure() replaces the group's backends and routes with a new config's,
// as one collective over the store (see group/swap_attempt.h). The group's current backends,
// routes and config are one immutable snapshot (State) that only the calling thread
// replaces, so every call sees one whole generation; config(), routes() and backend()
// return references into the snapshot, valid until the next reconfigure().
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "commhost/config.h"
#include "commhost/dispatcher.h"
#include "commhost/export.h"
#include "commhost/logging.h"
#include "commhost/registry.h"
#include "commhost/sdk/backend.h"
#include "commhost/store.h"
#include "commhost/supervisor.h"

namespace commhost {

struct ReconfigureOptions {
  // Bounds each wait of the protocol (for the peers' check, drain, build and report);
  // 0: the group's current group.timeout.
  std::chrono::milliseconds timeout{0};
  // Load again every plugin the new config's backends and hooks use whose file changed on
  // disk since it was loaded (PluginRegistry::reload, into a copy of the group's registry):
  // a backend of a reloaded plugin counts as changed and is rebuilt. The ranks compare the
  // hashes of the builds they would run and refuse, naming the rank, when they differ. A
  // file that fails to load refuses the swap on every rank with why; all keep the old build.
  bool reloadPlugins = false;
  // Refuse (on every rank, naming the backend and why) unless every backend the new
  // config sends ops to that the current one does not ran as a shadow in this group (a
  // route's `shadow:`) with at least one sample and no disagreement or failure.
  bool onlyIfShadowAgrees = false;
};

// Shadow mode (a route's `shadow:`): the comparisons of one (op, backend, shadow, size
// class) in this group. Size classes are powers of two: `bytes` is the class's upper end.
struct ShadowRecord {
  std::string op, backend, shadow;
  int64_t bytes = 0;                   // size class: calls of up to this many bytes (a power of two)
  uint64_t samples = 0;                // sampled calls issued to the shadow
  uint64_t agreed = 0;                 // results equal (integers) or within the route's rtol/atol
  uint64_t disagreed = 0;              // results differ: `firstDisagreement` says where
  uint64_t failed = 0;                 // the shadow (or the primary) failed: `firstFailure` says why
  double backendUs = 0, shadowUs = 0;  // mean latency of the compared calls, issue to completion
  std::string firstDisagreement, firstFailure;
};

// What one successful reconfigure() did on this rank.
struct ReconfigureReport {
  uint64_t generation = 0;  // the group's config generation now (0: the one it was created with)
  // Phase times on this rank: the ranks agreeing on the config, draining this rank's works
  // in flight, building the new backends (their rendezvous), reporting and switching.
  std::chrono::microseconds check{0}, drain{0}, build{0}, commit{0}, total{0};
  std::vector<std::string> kept;      // backends whose entry (plugin, options, timeout) did not change
  std::vector<std::string> built;     // backends created for the new config
  std::vector<std::string> removed;   // backends shut down (replaced or no longer used)
  std::vector<std::string> reloaded;  // plugins loaded again from a changed file (reloadPlugins)
};

// Elastic membership (ProcessGroup::shrink).
struct ShrinkOptions {
  // Bounds each wait of the protocol (the survivors' agreement, the new backends' build
  // and the confirmation); 0: the group's group.timeout.
  std::chrono::milliseconds timeout{0};
};

// What one successful shrink() did on this rank. Ranks are this group's, before and after.
struct ShrinkReport {
  uint64_t generation = 0;         // the group's generation now (one more than before)
  int rank = 0;                    // this rank's rank in the group now
  int worldSize = 0;               // the group's size now
  std::vector<int> oldRanks;       // oldRanks[r]: the rank before of the member that is rank r now
  std::vector<int> removed;        // ranks before that are members no more (lost, or too late to agree)
  std::vector<int> removedGlobal;  // the same, as global (job) ranks
  uint64_t seq = 0;                // the seq the group continues from (the highest any survivor issued)
  // Phase times on this rank: agreeing on the survivors, building the backends for them,
  // every survivor confirming its build, and switching.
  std::chrono::microseconds agree{0}, build{0}, confirm{0}, commit{0}, total{0};
};

class COMMHOST_API ProcessGroup {
 public:
  struct Setup {
    std::shared_ptr<const Config> config;
    std::shared_ptr<const PluginRegistry> registry;
    StorePtr store;  // the job's store; the group works under "<group name>/<generation>/"
    int rank = 0;
    int worldSize = 1;
    // The overrides `config` was loaded with: syncPoint() loads a published config with
    // them (and `registry`), as this rank loaded the first one.
    ConfigOverrides overrides;
    // Where the supervisor publishes this process's status record and reads trace-dump
    // requests (what `commhost status`, `top` and `trace dump` read); null: `store`. The
    // torch bridge passes the root of torch's store here (below torch's key prefixes),
    // so a torch job is read at the same keys as any other.
    // Last, so that brace-initialised Setups written before it still compile.
    StorePtr jobStore;
    // Ranks of the job on this host (LOCAL_WORLD_SIZE), for a tuner; 0: unknown (taken as
    // worldSize). Subgroups inherit it, capped at their size.
    int localWorldSize = 0;
  };
  // Creates the configured backends and checks, through the store, that every rank
  // loaded the same config (ConfigError naming both ranks' hashes otherwise).
  static std::shared_ptr<ProcessGroup> create(Setup setup);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const;
  int size() const;
  const std::string& name() const;
  // Global (world) rank of each member, indexed by rank in this group.
  const std::vector<int>& globalRanks() const;
  // The seq the last issued op got (0 before the first).
  uint64_t seq() const;
  // The payload bytes of every op issued on this group so far (the bytes each call is
  // routed by: an allreduce's tensor, an allgather's input), for measuring what a comm
  // hook actually sends; compare two readings around a step.
  uint64_t bytesIssued() const;
  const Config& config() const;
  const RouteTable& routes() const;
  // The plugins it was created with, or the snapshot the last reconfigure() with
  // reloadPlugins committed; valid until the next reconfigure().
  const PluginRegistry& registry() const;
  // The config generation: 0 for the config the group was created with, +1 for every
  // successful reconfigure().
  uint64_t generation() const;
  // The current generation's store. Keys written through it belong to the generation:
  // a membership round later (shrink, grow) they are deleted, as the group's own are.
  const StorePtr& store() const;
  Backend& backend(const std::string& name) const;

  // Shadow mode: what every sampled call compared so far, one record per (op, backend,
  // shadow, size class); any thread may call it. Records of earlier generations stay.
  // A comparison is recorded when the later of the two works completes, usually the
  // shadow's, after the caller's wait() returned: `waitInFlight` waits up to that long
  // for the sampled calls already issued to be compared (0: what is recorded now).
  std::vector<ShadowRecord> shadowReport(std::chrono::milliseconds waitInFlight = {}) const;

  WorkPtr allreduce(Tensor& tensor, const AllreduceOptions& opts = {});
  WorkPtr allreduceCoalesced(std::vector<Tensor>& tensors, const AllreduceCoalescedOptions& opts = {});
  WorkPtr broadcast(Tensor& tensor, const BroadcastOptions& opts = {});
  WorkPtr reduce(Tensor& tensor, const ReduceOptions& opts = {});
  WorkPtr allgather(std::vector<Tensor>& outputs, const Tensor& input, const AllgatherOptions& opts = {});
  WorkPtr allgatherIntoTensor(Tensor& output, const Tensor& input, const AllgatherOptions& opts = {});
  WorkPtr allgatherCoalesced(std::vector<std::vector<Tensor>>& outputs, const std::vector<Tensor>& inputs,
                             const AllgatherOptions& opts = {});
  WorkPtr gather(std::vector<Tensor>& outputs, const Tensor& input, const GatherOptions& opts = {});
  WorkPtr scatter(Tensor& output, const std::vector<Tensor>& inputs, const ScatterOptions& opts = {});
  WorkPtr reduceScatter(Tensor& output, const std::vector<Tensor>& inputs, const ReduceScatterOptions& opts = {});
  WorkPtr reduceScatterTensor(Tensor& output, const Tensor& input, const ReduceScatterOptions& opts = {});
  WorkPtr alltoall(std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs, const AlltoallOptions& opts = {});
  WorkPtr alltoallSingle(Tensor& output, const Tensor& input, const AlltoallSingleOptions& opts = {});
  WorkPtr barrier(const BarrierOptions& opts = {});
  // Served by the host over the store for every backend. Throws TimeoutError naming
  // the ranks that did not arrive (all of them with waitAllRanks).
  void monitoredBarrier(const MonitoredBarrierOptions& opts = {});
  WorkPtr send(const Tensor& tensor, int dst, const SendOptions& opts = {});
  WorkPtr recv(Tensor& tensor, int src, const RecvOptions& opts = {});
  WorkPtr recvAnySource(Tensor& tensor, const RecvOptions& opts = {});

  // Subgroups. Collective over this group: every member calls it, in the same order.
  // newGroup returns null on ranks not in `ranks`. split groups ranks by color
  // (ordered by key, then rank); a negative color returns null. On every rank, members or
  // not, each of this group's backends takes part first (Backend::prepareSplit, in config
  // order), and a subgroup's backend gets what its namesake here prepared on this rank
  // (BackendContext::splitFrom).
  std::shared_ptr<ProcessGroup> newGroup(const std::vector<int>& ranks);
  std::shared_ptr<ProcessGroup> split(int color, int key);

  // Completion hooks (see supervisor.h): `hook` receives every work of this group that
  // ends, on the supervisor's hook thread. Returns an id for removeCompletionHook.
  // Throws InvalidArgument when supervisor.enabled is false.
  int addCompletionHook(CompletionHook hook);
  void removeCompletionHook(int id);

  // Hot swap, a collective over this group (every rank calls it, from the thread that
  // issues the group's ops, in the same place of its op sequence). `newConfig` must be
  // loaded with this group's registry; group.name must not change. All ranks switch, or
  // none does: on any rank's failure every rank keeps its backends and throws (ConfigError
  // when the ranks' configs differ or one is invalid, PluginError when a backend failed to
  // start, TimeoutError / PeerLostError when a rank did not take part), naming the ranks
  // and their reasons. Seq numbers continue. The supervisor's settings stay those the
  // process started with.
  // Inside a span of beginForeignIssue() (a Reducer iteration) this rank takes part only
  // to refuse, with a ConfigError naming the span, on every rank.
  ReconfigureReport reconfigure(std::shared_ptr<const Config> newConfig, const ReconfigureOptions& options = {});

  // Elastic membership: after a peer was lost (an op failed with PeerLostError; with
  // supervisor.on_peer_loss: shrink the process lives on), the survivors go on as a smaller
  // group. A collective over the survivors, called by each from the thread that issues
  // the group's ops:
  //   agree:   each posts that it is alive (with its seq) under "shrink/<round>/" of the
  //            group store and waits until every rank has posted or is known lost (the
  //            heartbeat's verdict, which every survivor learns through the incident log),
  //            up to the timeout; then the first to write the decision names the members
  //            for all. A rank alive but slow is waited for, never dropped on one rank's
  //            opinion; one that has not posted by the timeout is left out.
  //   build:   every member takes rank = its index among the members and builds every
  //            backend anew for the new size, under a store prefix of its own
  //            ("<group>/<creation>/m<round>"; the generation before the last is swept
  //            at each commit, but for each round's decision).
  //   confirm: each posts that its build succeeded and waits for all members'; any
  //            failure (another peer lost meanwhile) fails the round on every member,
  //            which keeps its old rank and may call shrink() again.
  //   commit:  the old backends are shut down, the supervisor watches the new membership
  //            (completion hooks carry over), and the group continues at the next
  //            generation with the highest seq any member issued. Works of the old
  //            generation never complete successfully.
  // Throws AbortedError on a rank left out ("removed from group ... at generation G"),
  // and on every member when fewer than supervisor.min_ranks remain (the group stays
  // aborted). Subgroups are separate groups: a subgroup that lost a member shrinks when
  // its survivors call its shrink(). The store must outlive the lost rank: a store served
  // by a rank that is gone (the tcp store on rank 0) cannot be shrunk around; with
  // `commhost run` the launcher serves it when on_peer_loss is shrink.
  ShrinkReport shrink(const ShrinkOptions& options = {});

  // Marks a span in which threads other than the calling one may issue ops on this group
  // on its behalf (a Reducer iteration, from prepareForBackward to finalize: the comm hook
  // runs on markReady threads). The swap replaces the snapshot those threads read, so
  // reconfigure() refuses inside a span. Spans nest (a counter); any thread may end one.
  void beginForeignIssue();
  void endForeignIssue();

  // A step boundary: workloads call it on every rank of the group, from the thread that
  // issues the group's ops, once per step (with at least one collective, waited on, in
  // every step). When nothing was published it costs a call and two relaxed loads. With
  // group.sync_poll > 0 (`commhost run --watch` sets it) a thread of the world group
  // reads "<group>/pending/epoch" of the job store every sync_poll; a new epoch E (its
  // YAML under "<group>/pending/<E>/yaml", its name under ".../source") starts an
  // agreement through the store (see sync_point.cc): each rank posts that it saw it,
  // rank 0, once all have, decides the sync count S = its own count + 2, and every rank
  // loads the YAML (this group's registry and Setup::overrides) and calls reconfigure()
  // when its count reaches S, so all switch between the same two steps. The margin of 2
  // assumes no rank runs more than one step ahead of rank 0, which holds when each step
  // waits on a collective of the group. An invalid YAML or a rolled-back swap is logged
  // and the group stays on its generation (syncStatus().lastError says why); a rank that
  // learns S only after passing it throws InvalidArgument. Throws what reconfigure()
  // throws for an aborted group or a lost peer.
  // Joins take the same path: a process started with group.join (a restarted rank)
  // raises "<group>/join/count"; the poller sees it, and at the agreed sync count every
  // member admits the ranks that asked (a membership round, see group/membership.h):
  // the group grows at the next generation, renumbered by global rank, and the joiner's
  // create() returns. A config epoch agreed at the same count waits for the next
  // agreement, which the joiner takes part in. The workload then hands the joiner its
  // state (commhost train broadcasts it from a member).
  void syncPoint();
  struct SyncStatus {
    uint64_t count = 0;     // syncPoint() calls so far
    uint64_t epoch = 0;     // the last epoch this rank finished (applied, rejected or rolled back)
    std::string lastError;  // why that epoch was not applied; "" when it was
  };
  SyncStatus syncStatus() const;

  void abort(const std::string& reason);
  void shutdown();

  struct State;         // one config generation: config, routes, backends (group_state.h)
  struct AbortTargets;  // every backend an abort must reach, shared with the supervisor
  struct Impl;          // everything behind this API (group/impl.h)

 private:
  explicit ProcessGroup(std::unique_ptr<Impl> impl);
  const std::unique_ptr<Impl> impl_;  // never null
};

// Where this process sits in the job, read from the launcher's environment, the first
// of these that sets a rank: torchrun style (RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE; what `commhost run` sets), Open MPI (OMPI_COMM_WORLD_*), MPICH / Intel
// MPI Hydra (PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS) or Slurm
// (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, ...). Without any of them: rank 0 of 1.
// The store's address is MASTER_ADDR:MASTER_PORT; under Slurm, when they are unset, the
// first host of SLURM_STEP_NODELIST (else SLURM_JOB_NODELIST) and 29500 + SLURM_JOB_ID % 10000.
struct LaunchInfo {
  int rank = 0;
  int worldSize = 1;
  int localRank = 0;
  int localWorldSize = 1;
  std::string masterAddr;
  int masterPort = 0;
  std::string configPath;  // COMMHOST_CONFIG, may be empty
  std::string launcher;    // "torchrun", "openmpi", "pmi", "slurm" or "none"
  int reportFd = -1;       // COMMHOST_LAUNCH_REPORT_FD: `commhost run`'s report channel (launch_report.h)
};
COMMHOST_API LaunchInfo detectLaunch();

struct InitOptions {
  std::string configPath;  // overrides COMMHOST_CONFIG; empty = embedded default
  ConfigOverrides overrides;
};
// Reads the launch environment and config, opens the configured store and creates the
// world group. Throws ConfigError / PluginError / StoreError with what to fix.
COMMHOST_API std::shared_ptr<ProcessGroup> init(const InitOptions& options = {});

}  // namespace commhost
