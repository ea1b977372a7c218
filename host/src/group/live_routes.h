// SPDX-License-Identifier: Apache-2.0
// Internal: live re-routing (`tune: live` on a route, RouteSpec::live).
//
// The path, in three parts:
//   Call::issue()      a sampled call of a live segment also runs on one of the segment's
//                      candidates (RouteTable::liveCandidates, picked by seq: the same
//                      one on every rank), through the shadow machinery (shadow.h);
//   LiveStats::add()   the comparison's outcome and both times, per cell and size class,
//                      on whichever backend thread completes the sample last;
//   liveRound()        every tune.live_every sync points, on the calling thread: each
//                      rank posts its summaries under live/<round>/<rank> of the group
//                      store and reads every rank's; decideLive() turns them into the
//                      same switches on every rank (a pure function of what all ranks
//                      posted and the current table), and the group swaps to a table
//                      with them: a routes-only swap, one pointer store, no backend built.
// A candidate that disagreed or failed once, on any rank, is dropped from every live route
// of the group (and a class it had won goes back) until the table is built from the
// config again (a hot swap, a membership change). A size class moves when its candidate
// was faster by tune.live_margin (medians, each on the rank that waited least) over the class's window
// (tune.live_window samples on every rank, doubled after each switch of the class:
// hysteresis, so it cannot flap); a candidate that had its window without that stops
// being sampled in the class (settled).
//
// Threads: LiveStats is shared by the group and the sample callbacks (which may outlive
// the group); its mutex guards the cells. The rest is the calling thread's.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "commhost/dispatcher.h"
#include "commhost/mutex.h"
#include "commhost/types.h"

namespace commhost {

// One cell's size class (op, dtype, reduce op; the CPU) and the pair compared there.
struct LiveKey {
  OpType op = OpType::Allreduce;
  DType dtype = DType::Float32;
  ReduceOp::Kind reduceOp = ReduceOp::Sum;  // Sum for ops that do not reduce
  int64_t sizeClass = 1;                    // calls of (sizeClass / 2, sizeClass] bytes ([0, 1] for 1)
  std::string backend, candidate;           // the routed backend and the one sampled beside it
  uint64_t base = 0;                        // State::tableBase of the table it was routed by
  auto tied() const { return std::tie(op, dtype, reduceOp, sizeClass, backend, candidate, base); }
  bool operator<(const LiveKey& o) const { return tied() < o.tied(); }
  bool operator==(const LiveKey& o) const { return tied() == o.tied(); }
  bool sameCell(const LiveKey& o) const {
    return op == o.op && dtype == o.dtype && reduceOp == o.reduceOp && sizeClass == o.sizeClass;
  }
};

// What one rank measured for one key: its clean samples (up to the window asked for) and
// the medians over them; `bad` counts disagreements and the candidate's failures.
struct LiveSummary {
  LiveKey key;
  uint64_t samples = 0;
  double backendUs = 0, candidateUs = 0;
  uint64_t bad = 0;
  std::string firstBad;
};

struct LiveRules {
  size_t window = 16;
  double margin = 0.1;
  std::map<std::tuple<OpType, DType, ReduceOp::Kind, int64_t>, int> flips;  // switches so far, per cell
  size_t windowOf(const LiveKey& k) const;                                  // window << flips (at most 16x)
};

class LiveStats {
 public:
  enum class Outcome { Agreed, Disagreed, CandidateFailed, BackendFailed };
  // Keeps the last `capacity` clean samples of each key.
  explicit LiveStats(size_t capacity) : capacity_(capacity) {}
  // `key.sizeClass` is set here from `bytes`. A failed backend tells nothing of the
  // candidate: not counted.
  void add(LiveKey key, int64_t bytes, double backendUs, double candidateUs, Outcome outcome, const std::string& detail)
      EXCLUDES(mutex_);
  // Every key's summary of tables built at `base`, medians over its last
  // rules.windowOf(key) clean samples; keys of an older base are forgotten (a hot swap
  // or membership change since: live routing starts over).
  std::vector<LiveSummary> summaries(const LiveRules& rules, uint64_t base) EXCLUDES(mutex_);
  void setCapacity(size_t capacity) EXCLUDES(mutex_);
  // Forgets the cell's samples (either direction): after a switch, a fresh window.
  void forget(const LiveKey& cell) EXCLUDES(mutex_);

 private:
  struct Cell {
    std::deque<std::pair<double, double>> times;  // (backend, candidate) µs, the newest last
    uint64_t bad = 0;
    std::string firstBad;
  };
  size_t capacity_ GUARDED_BY(mutex_);
  mutable Mutex mutex_;
  std::map<LiveKey, Cell> cells_ GUARDED_BY(mutex_);
};

// One rank's summaries through the store, and back (a versioned JSON object).
std::string encodeLive(int rank, const std::vector<LiveSummary>& summaries);
// Throws Error naming `rank` and what is wrong with its text.
std::vector<LiveSummary> decodeLive(int rank, const std::string& text);

// What the ranks decided together.
struct LiveDecision {
  std::vector<RouteTable::Reroute> switches;
  std::vector<LiveKey> switched;   // the cell of each switch (the key that won)
  std::vector<int> dropped;        // candidates dropped until the routes are rebuilt (by backend index)
  std::vector<std::string> lines;  // one per switch and drop, for the record and the log
  // Some class of the table in use still gathers its window on some rank: the next round
  // comes after tune.live_every sync points again. Otherwise the rounds back off (each
  // one that decides nothing doubles the wait, up to 64x), as nothing is about to change.
  bool learning = false;
  bool empty() const { return switches.empty() && dropped.empty(); }
};

// The wait before the next round, in sync points, after a round that decided `d`.
uint64_t nextLiveInterval(const LiveDecision& d, uint64_t every, uint64_t interval);

// The switches every rank makes, from every rank's summaries (byRank[r]) and the table
// now in use. Deterministic: equal inputs, equal decision, on every rank.
LiveDecision decideLive(const std::vector<std::vector<LiveSummary>>& byRank, const RouteTable& table,
                        const LiveRules& rules);

}  // namespace commhost
