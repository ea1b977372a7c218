// SPDX-License-Identifier: Apache-2.0
// Internal: one round of ProcessGroup::shrink (elastic membership), one method per phase
// over the round's shared state. The protocol is described in process_group.h; round R
// (counted alike on every survivor) uses keys under "shrink/<R>/" of the group's store
// as it was before the round:
//   alive/<old rank>  the rank's seq, posted as it enters (agree)
//   decision          the members, as old ranks "0,1,3": the first writer decides
//   built/<new rank>  the rank's build succeeded (confirm)
//   failed            why some member's build or wait failed: every member fails the round
// The new generation's backends rendezvous under "m<R>/" of that store.
//
// Threading: the round, the group's State, rank, size and store belong to the calling
// thread, as in a swap; the supervisor reaches the backends being built through the
// group's AbortTargets, and the new generation gets AbortTargets of its own, so a late
// abort from the old generation's watchdog cannot reach it.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "commhost/process_group.h"
#include "group_state.h"

namespace commhost {

// The decision's value: old ranks, ascending, comma-separated.
std::string encodeMembers(const std::vector<int>& members);
// Throws StoreError naming `key` when `text` is not such a list within [0, worldSize).
std::vector<int> decodeMembers(const std::string& text, int worldSize, const std::string& key);

class ShrinkRound {
 public:
  ShrinkRound(ProcessGroup& group, const ShrinkOptions& options);
  // The phases in order; throws after recording the round when it does not commit.
  ShrinkReport run();

 private:
  using Steady = std::chrono::steady_clock;
  void agree();
  void build();
  void confirm();
  void commit();

  // The old ranks that posted alive/ by now; `settled` says whether every other rank
  // has either posted or is known lost.
  std::vector<int> posted(bool& settled) const;
  void checkMembers();  // this rank is a member; enough members are left
  // A member's build or wait failed: tells the others, restores the old membership.
  [[noreturn]] void failRound(ErrorCode code, const std::string& why);
  void record(const std::string& outcome, const std::string& error);
  std::string removedText() const;
  std::chrono::microseconds since(Steady::time_point t) const;

  ProcessGroup& g_;
  const Steady::time_point t0_ = Steady::now();
  std::chrono::milliseconds timeout_{0};
  Steady::time_point deadline_{};
  uint64_t round_ = 0;
  std::string prefix_;  // "shrink/<round>/"
  ErrorContext where_;
  int minRanks_ = 1;
  // The group as it was: restored when the round fails.
  int oldRank_ = 0, oldSize_ = 0;
  std::vector<int> oldGlobal_;
  StorePtr oldStore_;
  std::vector<int> members_;  // old ranks, ascending
  std::shared_ptr<const ProcessGroup::State> next_;
  ShrinkReport report_;
};

}  // namespace commhost
