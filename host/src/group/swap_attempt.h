// SPDX-License-Identifier: Apache-2.0
// Internal: one attempt of ProcessGroup::reconfigure (hot swap), one method per phase over
// the attempt's shared state.
//
// A collective over the group's store, independent of every backend (old or new), run on
// the group's calling thread. Attempt A (counted alike on every rank) uses keys under
// "swap/<A>/" of the group store, with typed values (swap_messages.h):
//   1. check:  each rank validates the config (with reloadPlugins: first loads again, into a
//              copy of its registry, the config's plugins whose files changed) and
//              publishes a CheckVote as check/<rank>; all read all, and refuse alike
//              unless every rank voted ok with the same config hash and plugin builds,
//              naming the ranks that differ.
//   2. drain:  each rank waits for its works in flight on this group (the supervisor's list).
//   3. build:  each rank creates the backends whose entry changed, rendezvousing under
//              "swap/<A>/backend/<name>"; unchanged ones are kept (the same objects).
//   4. decide: each rank publishes a BuildReport as report/<rank>. A rank that fails also
//              sets "failed" at once, so peers still inside a plugin's rendezvous stop
//              waiting for it (SwapStore) instead of timing out. Then the first rank to
//              write "outcome" decides for all (commit only when every report is ok).
//   5. commit: on commit, every rank replaces its State pointer (the calls that follow
//              route through the new generation) and its registry pointer (the reloaded
//              copy, if any) and shuts the replaced backends down; on rollback every rank
//              drops what it built and throws, keeping the old State.
// Every wait is bounded by the timeout and ends early when the group is aborted or the
// heartbeat finds a peer lost (a rank killed mid-swap): never a hang. A rank that cannot
// read the decision (the store went away after the vote) cannot know whether the others
// committed: it aborts its group rather than run on a generation its peers may have left.
//
// Threading: the attempt, the group's State, setup_ (its registry pointer included) and
// swapAttempts_ belong to the calling thread; a reload writes only the registry copy this
// attempt made, never the one the group holds (which other groups and threads may read);
// AbortTargets (its own mutex) lets the supervisor's watchdog abort the backends being
// built too.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../supervisor/flight_recorder.h"
#include "commhost/process_group.h"
#include "group_state.h"
#include "swap_messages.h"

namespace commhost {

class SwapAttempt {
 public:
  // With a non-empty `loadError` this rank could not load the config the others swap to:
  // it takes part only to refuse it, so the others fail at once naming it.
  SwapAttempt(ProcessGroup::Impl& group, std::shared_ptr<const Config> config, const ReconfigureOptions& options,
              std::string loadError);
  // The phases in order; throws (after recording the attempt) on refusal or rollback.
  ReconfigureReport run();

 private:
  using Steady = std::chrono::steady_clock;
  // Why a gather ended without every rank's key, kept so that the decide phase can still
  // agree on an outcome with the others.
  struct Missed {
    ErrorCode code = ErrorCode::Timeout;
    std::string what, hint;
  };

  void check();
  void drain();
  void build();
  void decide();
  void commit();

  swap::CheckVote vote();  // this rank's check of the config
  void reloadChangedPlugins();
  void openNewPlugins();
  void forgetPreviousAttempt();
  void refuseUnlessAllOk(const std::vector<swap::CheckVote>& votes);
  void refuseUnlessAllSame(const std::vector<swap::CheckVote>& votes);
  void reportFailure(const swap::BuildReport& failure);  // sets "failed" for the peers' rendezvous
  [[noreturn]] void rollBack(const std::vector<swap::BuildReport>& reports, bool gathered, const Missed& missed,
                             const swap::Decision& decision);
  [[noreturn]] void abortUndecided(const std::string& storeError);
  void dropBuilt();
  // Records the attempt as rolled back and throws; nothing of the group changed.
  [[noreturn]] void fail(ErrorCode code, const std::string& what, const std::string& hint);
  void finish(const std::string& outcome, const std::string& error);

  std::vector<std::string> keysOf(const std::string& kind) const;
  // Every rank's `kind` key; false with `missed` set (throws nothing) when one is missing
  // at the deadline or the wait was stopped.
  bool tryGather(const std::string& kind, const char* phase, std::vector<Bytes>& values, Missed& missed);
  std::vector<Bytes> gather(const std::string& kind, const char* phase);
  std::string rankText() const { return std::to_string(g_.globalRanks_[g_.rank_]); }

  ProcessGroup::Impl& g_;
  std::shared_ptr<const Config> config_;
  ReconfigureOptions options_;
  std::string loadError_;
  const Steady::time_point t0_ = Steady::now();
  uint64_t attempt_ = 0;
  uint64_t from_ = 0;
  ErrorContext where_;
  std::chrono::milliseconds timeout_{0};
  std::string round_;                         // "swap/<attempt>/"
  std::string generations_;                   // " (generation F -> F+1, attempt A)", for messages
  std::shared_ptr<SwapStore> protocolStore_;  // the protocol's waits
  std::shared_ptr<SwapStore> buildStore_;     // the backends' rendezvous: also stops on "failed"
  std::shared_ptr<std::atomic<bool>> abandoned_ = std::make_shared<std::atomic<bool>>(false);
  std::optional<RouteTable> votedRoutes_;           // the new table, as this rank voted on it (vote())
  std::shared_ptr<const PluginRegistry> registry_;  // the group's, or a copy (plugins reloaded or opened)
  std::vector<std::string> reloaded_;
  swap::BuildReport failure_;  // this rank's drain or build (Ok while none failed)
  std::shared_ptr<const ProcessGroup::State> next_;
  ReconfigureReport report_;
  SwapRecord record_;
};

}  // namespace commhost
