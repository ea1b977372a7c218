// SPDX-License-Identifier: Apache-2.0
// Internal: everything behind ProcessGroup's API (commhost/process_group.h), which holds
// one Impl and forwards to it. Its parts live in the files of this folder: creation and
// teardown (process_group.cc), issuing ops (call.h, collectives.cc), subgroups
// (subgroups.cc), hot swap (reconfigure.cc, swap_attempt.h), membership (membership.h)
// and sync polling (sync_point.h). SwapAttempt and MembershipRound work on it directly.
//
// Threads: the members marked "calling thread only" belong to the thread that issues the
// group's ops; the atomics are read by any thread; the rest is set at creation.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "commhost/process_group.h"
#include "key_ledger.h"

namespace commhost {

namespace supervisor {
class Supervisor;
struct GroupMonitor;
}  // namespace supervisor

struct ShadowStats;  // shadow.h
class LiveStats;     // live_routes.h
struct LiveRules;
struct LiveSummary;
struct LiveDecision;

struct ProcessGroup::Impl {
  // The public API's parts that are more than a field read (process_group.cc and the
  // files named above); the front forwards each.
  const Config& config() const;
  const RouteTable& routes() const;
  uint64_t generation() const;
  Backend& backend(const std::string& name) const;
  std::vector<ShadowRecord> shadowReport(std::chrono::milliseconds waitInFlight) const;
  void monitoredBarrier(const MonitoredBarrierOptions& opts);
  std::shared_ptr<ProcessGroup> newGroup(const std::vector<int>& ranks);
  std::shared_ptr<ProcessGroup> split(int color, int key);
  int addCompletionHook(CompletionHook hook);
  void removeCompletionHook(int id);
  ReconfigureReport reconfigure(std::shared_ptr<const Config> newConfig, const ReconfigureOptions& options);
  ShrinkReport shrink(const ShrinkOptions& options);
  void syncPoint() {
    ++syncCount_;
    liveTick();
    if (syncLatest_.load(std::memory_order_relaxed) > syncDone_ ||
        joinLatest_.load(std::memory_order_relaxed) > joinsDone_)
      syncPointSlow();
  }
  void abort(const std::string& reason);
  void shutdown();
  uint64_t seq() const { return seq_.load(std::memory_order_relaxed); }

  // Internal steps.
  Impl(ProcessGroup::Setup setup, std::string name, std::vector<int> globalRanks);
  ~Impl();  // shuts the group down (shutdown()), then releases its supervisor
  static std::shared_ptr<ProcessGroup> createWorld(ProcessGroup::Setup setup);  // create() less its launch reports
  // A new group (front and Impl) working under `storePath` of the job store
  // (setup.store), before its config check and backends: createWorld's and makeSubgroup's
  // first step.
  static std::shared_ptr<ProcessGroup> open(ProcessGroup::Setup setup, std::string name, std::vector<int> globalRanks,
                                            std::string storePath);
  // What this group's backends prepared for this rank's subgroup (Backend::prepareSplit),
  // by backend name.
  using SplitHandles = std::map<std::string, std::shared_ptr<void>>;
  void createBackends(const SplitHandles& splitFrom = {});
  // The backends of `config` for this group, from `registry`'s plugins; those whose entry
  // matches one of `keep` (by name) and whose plugin is not in `reloaded` are taken from
  // it. Backends built under "<prefix>backend/<name>" of the group store, through `store`
  // when given (reconfigure's abandonable store). A subgroup's
  // first backends get their namesakes' `splitFrom` entries. `routes`: the table the ranks
  // agreed on (a tuner's is checked before it is used); null: built here. Throws on the
  // first backend that fails (the ones built so far are released).
  std::shared_ptr<const State> buildState(std::shared_ptr<const Config> config, const PluginRegistry& registry,
                                          const State* keep, const std::vector<std::string>& reloaded,
                                          const std::string& prefix, const StorePtr& store, uint64_t generation,
                                          std::vector<std::string>* kept, std::vector<std::string>* built,
                                          const SplitHandles* splitFrom = nullptr, const RouteTable* routes = nullptr);
  void checkSameConfig();
  // What a tuner is told of this group (RouteTable::forGroup).
  TableSite tableSite() const;
  // With a tuner (route_agreement.cc): this rank's table, once every rank of the group has
  // published its own through `store` (the group's, or a membership round's) and all are
  // the same. ConfigError naming each set of ranks' fingerprint when they differ, or the
  // rank whose build failed and why (this rank's own error rethrown).
  RouteTable agreedRoutes(Store& store);
  void startSyncPoller();  // create(): the world group's, when group.sync_poll > 0
  void stopSyncPoller();
  void syncPointSlow();  // a published epoch is pending (sync_point.cc)
  // tune: live (live_routes.h): the ranks pool their candidates' samples and switch
  // routes alike; a routes-only swap when they decide to (live_round.cc).
  void liveTick();  // a round when this sync count is one (a call per step: not inline, State is opaque here)
  void liveRound();
  std::vector<std::vector<LiveSummary>> liveExchange();
  void liveSwitch(const LiveDecision& d, std::chrono::steady_clock::time_point started, int64_t startedUs);
  void requireShadowAgreement(const RouteTable& next, const ErrorContext& where) const;  // reconfigure.cc
  // Ends a protocol's wait early (a swap's, a live round's): the group was aborted, or a
  // peer is lost. Bare messages: the phase that waited wraps them in its own. Captures
  // only what it shares: a backend may keep its store (and this check) beyond the attempt.
  std::function<void()> stopIfBroken(const std::string& during) const;
  void applyEpoch(uint64_t epoch);
  // reconfigure(), or, with a non-empty `loadError` (this rank could not load the config
  // the others swap to), taking part only to refuse it: the others fail at once naming
  // this rank instead of waiting for it until the timeout.
  ReconfigureReport reconfigureOrRefuse(std::shared_ptr<const Config> newConfig, const ReconfigureOptions& options,
                                        const std::string& loadError);
  // Every backend's prepareSplit for one round, on every rank of this group; returns what
  // they prepared when this rank is a member (request.color != kNoColor).
  SplitHandles prepareSplits(const SplitRequest& request);
  // The subgroup "<name>/<label>" over `members` (ranks of this group, in subgroup rank
  // order); null when this rank is not one of them.
  std::shared_ptr<ProcessGroup> makeSubgroup(const std::vector<int>& members, const std::string& label,
                                             const SplitHandles& splitFrom);
  struct Call;                      // one op being validated and issued; see group/call.h
  void joinRunningJob();            // create() with group.join (membership.cc)
  void growAt(uint64_t joinsUpTo);  // a sync point admits the join requests up to joinsUpTo
  void startSupervision();
  void publishStatusInfo();  // the committed generation, for `commhost status` (the monitor's Info)

  ProcessGroup::Setup setup_;
  std::string name_;
  int rank_;
  int worldSize_;
  std::vector<int> globalRanks_;
  StorePtr store_;  // ledger_: the generation's PrefixStore ("<storePath_>") over the job store
  // Calling thread only. The generation's store with the keys this rank wrote in it, and
  // what the next membership round's commit deletes, once every member is past it: the
  // ledgers of earlier generations (and of failed rounds), and join requests and tickets
  // on the job store (membership.h).
  std::shared_ptr<KeyLedger> ledger_;
  std::vector<GenerationKeys> sweepNextRound_;
  uint64_t generationFirstRound_ = 0;  // the first membership round the current generation runs
  // Writes the keys this rank wrote in the generation so far (its backends' rendezvous)
  // where the members find them should this rank go; after each build (key_ledger.h).
  // Never throws: a store error is logged.
  void publishKeyManifest();
  std::vector<std::string> jobKeysNextRound_;
  // The current generation. The calling thread alone replaces it (reconfigure) and reads
  // it (every call takes it once), so it needs no lock; other threads reach the backends
  // through abortTargets_ only.
  std::shared_ptr<const State> state_;
  std::shared_ptr<AbortTargets> abortTargets_;  // abort() and the supervisor's abortGroup
  std::atomic<int> foreignIssue_{0};            // beginForeignIssue() spans open (any thread)
  uint64_t swapAttempts_ = 0;                   // calling thread only: names each attempt's store keys
  // Calling thread only: the store keys this rank's backends wrote building in attempts
  // every rank may not be past yet; the next attempt deletes them after its check.
  std::vector<std::string> swapLeftovers_;
  std::shared_ptr<Logger> logger_;
  std::atomic<uint64_t> seq_{0};          // collectives; written by the calling thread only, atomic for readers
  std::atomic<uint64_t> p2pSeq_{0};       // send/recv, counted apart (only two ranks take part); as seq_
  std::atomic<uint64_t> bytesIssued_{0};  // the issuing thread of the moment adds; any thread reads
  uint64_t subgroupCount_ = 0;            // calling thread only
  uint64_t membershipRounds_ = 0;         // calling thread only: names each membership round's keys
  std::string storePath_;                 // store_'s prefix on the job store ("<basePath_>[/m<round>]")
  // The group's path at creation ("<name>/<creation>"): membership round R's generation
  // lives at "<basePath_>/m<R>", so paths do not grow with the rounds.
  std::string basePath_;
  // Shared with the supervisor, which may abort the group from its watchdog thread.
  std::shared_ptr<std::atomic<bool>> aborted_ = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<supervisor::Supervisor> supervisor_;  // null when supervisor.enabled is false
  std::shared_ptr<supervisor::GroupMonitor> monitor_;
  bool checkCollectives_ = false;
  // syncPoint(): the latest epoch the poller thread read (it alone writes it); the rest is
  // the calling thread's. The poller and the agreement in progress live in sync_.
  std::atomic<uint64_t> syncLatest_{0};
  std::atomic<uint64_t> joinLatest_{0};  // join requests the poller saw ("<name>/join/count")
  uint64_t syncDone_ = 0;
  uint64_t joinsDone_ = 0;  // join requests admitted (or refused) so far
  uint64_t syncCount_ = 0;
  std::string syncError_;
  struct SyncAgreement;  // sync_point.h
  std::unique_ptr<SyncAgreement> sync_;
  // Shadow comparisons (shadow.h): completion callbacks of the primary and shadow works
  // add to it from backend threads, so they hold it, not the group.
  std::shared_ptr<ShadowStats> shadows_;
  // tune: live: the samples of live candidates, added to as shadows_ is; the rules and
  // the rounds so far are the calling thread's (live_routes.h).
  std::shared_ptr<LiveStats> live_;
  std::unique_ptr<LiveRules> liveRules_;
  uint64_t liveRounds_ = 0;
  uint64_t liveBase_ = 0;      // the State::tableBase live routing last started at: another one starts it over
  uint64_t liveInterval_ = 0;  // sync points between rounds now (0: not started)
  uint64_t liveTicks_ = 0;     // sync points since live routing (re)started: alike on every rank
  uint64_t liveNext_ = 0;      // the tick of the next round
  // The OpContext a call fills and hands to its backend, kept from call to call so that
  // only its per-op fields change: copying the group's name into a fresh one cost about
  // 55 of the ~1700 instructions of an 8 B op (a string assignment). The issuing thread
  // of the moment owns it, from Call's constructor to its destructor (callContextBusy_);
  // a call made inside another on the same group (its thread already holds it) fills a
  // context of its own. Atomic only so that two threads misusing a group at once
  // (process_group.h forbids it) are not a data race as well.
  OpContext callContext_;
  std::atomic<bool> callContextBusy_{false};
  // debug.check_collectives: the call being issued, as (issuing thread's id << 8) | op; 0:
  // none. Calls claim it to refuse a second thread issuing on the group meanwhile.
  std::atomic<uint64_t> issuer_{0};
};

}  // namespace commhost
