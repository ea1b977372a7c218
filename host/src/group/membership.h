// SPDX-License-Identifier: Apache-2.0
// Internal: one membership round of a group (elastic membership), one method per phase
// over the round's shared state. Three kinds, one protocol after the agreement:
//   Shrink  ProcessGroup::shrink(): the survivors of a lost rank (see process_group.h).
//   Grow    at a sync point: the members admit the ranks that asked to join.
//   Join    the joining process's side of a Grow (ProcessGroup::create with group.join).
//
// Round R (counted alike on every member, and handed to a joiner) uses keys under
// "member/<R>/" of the group's store as it was before the round:
//   alive/<old rank>  Shrink: the rank's seq, posted as it enters
//   decision          the members after the round as global ranks, ascending ("0,1,3");
//                     the first writer decides for all
//   failed            why some member's build or wait failed: every member fails the round
// and the new generation's backends rendezvous under "<group>/<creation>/m<R>/", where each
// member also posts built/<new rank> (confirm) and keys/<global rank> (what it wrote
// building, for the sweep: key_ledger.h). A rank asking to join writes, on the job
// store, "<group>/join/<J>/rank" (its global rank) with J from "<group>/join/count"; the
// members' sync point that admits it writes "<group>/join/<J>/admit" (a JoinTicket).
//
// Threading: the round, the group's State, rank, size and store belong to the calling
// thread, as in a swap; the supervisor reaches the backends being built through the
// AbortTargets the new generation gets as its build starts (its own, so that a late abort
// from the old generation's watchdog cannot reach the backends being built).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "commhost/process_group.h"
#include "group_state.h"

namespace commhost {

// A list of ranks as the store holds it: ascending, comma-separated.
std::string encodeRanks(const std::vector<int>& ranks);
// Throws StoreError naming `key` when `text` is not such a list within [0, limit).
std::vector<int> decodeRanks(const std::string& text, int limit, const std::string& key);

// What a joining rank needs to take part in the round that admits it, written by the
// members on the job store. Text lines; the config's YAML last.
struct JoinTicket {
  std::string storePath;    // the members' group store: "<group>/<creation>[/m<R>]"
  std::string basePath;     // the group's path at creation, "<group>/<creation>": rounds' stores are under it
  uint64_t round = 0;       // the membership round that admits it
  uint64_t generation = 0;  // the members' generation before the round
  uint64_t seq = 0;         // the group's seq at the sync point
  uint64_t syncCount = 0;   // the members' syncPoint() count at the round (the joiner's is one less)
  uint64_t epochDone = 0;   // the last config epoch the members finished
  uint64_t joinsDone = 0;   // the last join request the round admits
  std::string yaml;         // the members' config, as effective YAML
  std::string refused;      // non-empty: not admitted, and why
  std::string encode() const;
  static JoinTicket decode(const std::string& text, const std::string& key);
};

class MembershipRound {
 public:
  enum class Kind { Shrink, Grow, Join };
  // Grow: admits the join requests up to `joinsUpTo`. Join: `ticket` is what admitted it.
  MembershipRound(ProcessGroup::Impl& group, Kind kind, std::chrono::milliseconds timeout, uint64_t joinsUpTo = 0,
                  JoinTicket ticket = {});
  // The phases in order; throws after recording the round when it does not commit.
  ShrinkReport run();

 private:
  using Steady = std::chrono::steady_clock;
  void agree();
  void agreeShrink();
  void agreeGrow();
  void build();
  void confirm();
  void commit();

  // Shrink: the old ranks that posted alive/ by now; `settled` says whether every other
  // rank has either posted or is known gone.
  std::vector<int> posted(bool& settled);
  // A peer a verdict calls lost is gone once its heartbeat has stood still for
  // lossGrace_ as well: a live rank that aborts its own backends drops its connections,
  // which its peers' backends read as its exit (gloo: "connection closed by peer"),
  // while its heartbeat goes on.
  bool heartbeatStopped(int r);
  void checkMembers();  // this rank is a member; enough members are left
  void admitJoiners(const std::vector<int>& requests);
  // A member's build or wait failed: tells the others, restores the old membership.
  [[noreturn]] void failRound(ErrorCode code, const std::string& why);
  void retire(std::shared_ptr<const ProcessGroup::State> old);  // the old generation's backends
  // At commit: deletes the keys of the generation before the one this round ended, and of
  // the join tickets the round before handed out; this round's go at the next commit.
  void sweepEarlierRounds();
  void adoptKeysOfTheGone();
  // Rank `rank` (global `global`) of generation `gen`: what it published it wrote (its
  // builds), and its keys that have names (written since).
  void adoptKeysOf(KeyLedger& ledger, int rank, int global, const GenerationKeys& gen);
  GenerationKeys oldGeneration() const;  // the generation this round ends, for the sweeps
  void record(const std::string& outcome, const std::string& error);
  std::string ranksLeftOut() const;  // global ranks, for messages
  bool isMember(int global) const;
  int myGlobal() const;
  std::chrono::microseconds since(Steady::time_point t) const;

  ProcessGroup::Impl& g_;
  const Kind kind_;
  const Steady::time_point t0_ = Steady::now();
  std::chrono::milliseconds timeout_{0};
  Steady::time_point deadline_{};
  uint64_t joinsUpTo_ = 0;
  JoinTicket ticket_;
  uint64_t round_ = 0;
  std::string prefix_;  // "member/<round>/"
  ErrorContext where_;
  int minRanks_ = 1;
  uint64_t generation_ = 0;  // before the round
  // The group as it was: restored when the round fails. A joiner was in none.
  int oldRank_ = -1, oldSize_ = 0;
  std::vector<int> oldGlobal_;
  std::string oldPath_;
  StorePtr oldStore_;
  std::shared_ptr<KeyLedger> oldLedger_;  // oldStore_, as this rank wrote it
  uint64_t oldSyncRounds_ = 0;            // sync agreements the old generation started (the last perhaps under way)
  uint64_t oldFirstRound_ = 0;            // the first membership round the old generation ran
  std::vector<std::string> ticketKeys_;   // Grow: the join requests and tickets this round answered
  std::shared_ptr<ProcessGroup::AbortTargets> oldTargets_;  // set once build() gave the group new ones
  std::shared_ptr<std::atomic<bool>> oldAborted_;
  std::map<int, std::pair<int64_t, Steady::time_point>> beats_;  // peer -> its last heartbeat count, since
  std::chrono::milliseconds lossGrace_{0};
  std::vector<int> members_;  // global ranks after the round, ascending
  uint64_t syncCount_ = 0;    // Shrink: the highest syncPoint() count of the members
  std::shared_ptr<const ProcessGroup::State> next_;
  ShrinkReport report_;
};

}  // namespace commhost
