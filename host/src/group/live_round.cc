// SPDX-License-Identifier: Apache-2.0
// ProcessGroup::syncPoint's live-routing round (tune: live; the protocol is in
// live_routes.h): every rank posts what its candidates measured, reads every rank's, and
// makes the switches they decide together, all at this sync point.
//
// Store keys, under the group's store: live/<base>/<round>/<rank>, one per rank and round
// (base: the generation whose config built the table, as rounds start over with it). A
// rank in round R deletes its own key of round R - 2: every rank read it before posting
// R - 1, and this rank read all of R - 1 before reaching R.
#include <chrono>

#include "../supervisor/supervisor.h"
#include "commhost/errors.h"
#include "group_state.h"
#include "impl.h"
#include "live_routes.h"

namespace commhost {
namespace {

using Steady = std::chrono::steady_clock;

// Rounds count from each restart (a table built from the config, `base`).
std::string roundKey(uint64_t base, uint64_t round, int rank) {
  return "live/" + std::to_string(base) + "/" + std::to_string(round) + "/" + std::to_string(rank);
}

}  // namespace

void ProcessGroup::Impl::liveTick() {
  const uint64_t every = state_->liveEvery;
  if (every == 0) return;
  // The first tick, or a hot swap or membership change since, which built the table from
  // the config: live routing starts over (the samples of older tables are dropped by
  // summaries()), counting sync points and rounds from here. Every rank reaches this tick
  // at the same step, a rank that just joined too (its first syncPoint() is the members'
  // first after the round that admitted it), so the rounds stay alike; the sync count is
  // not used, as a joiner's is one behind the members'.
  if (liveInterval_ == 0 || state_->tableBase != liveBase_) {
    if (liveRules_) liveRules_->flips.clear();
    live_->setCapacity(16 * static_cast<size_t>(state_->config->host.getInt("tune.live_window")));
    liveBase_ = state_->tableBase;
    liveInterval_ = liveNext_ = every;
    liveTicks_ = liveRounds_ = 0;
  }
  if (++liveTicks_ >= liveNext_) liveRound();
}

void ProcessGroup::Impl::liveRound() {
  const auto started = Steady::now();
  const int64_t startedUs = supervisor::wallMicros();
  const Config& cfg = *state_->config;
  if (!liveRules_) liveRules_ = std::make_unique<LiveRules>();
  liveRules_->window = static_cast<size_t>(cfg.host.getInt("tune.live_window"));
  liveRules_->margin = cfg.host.getDouble("tune.live_margin");
  const LiveDecision d = decideLive(liveExchange(), state_->routes, *liveRules_);
  liveInterval_ = nextLiveInterval(d, state_->liveEvery, liveInterval_);
  liveNext_ = liveTicks_ + liveInterval_;
  if (!d.empty()) liveSwitch(d, started, startedUs);
}

// Posts this rank's summaries and reads every rank's (a lost peer or an abort ends the
// wait at once, as in a swap).
std::vector<std::vector<LiveSummary>> ProcessGroup::Impl::liveExchange() {
  const uint64_t round = liveRounds_++;
  ErrorContext where{name_, rank_, "syncPoint"};
  where.seq = seq();
  where.key = roundKey(liveBase_, round, rank_);
  SwapStore store(store_, stopIfBroken(""));
  std::vector<std::string> keys;
  for (int r = 0; r < worldSize_; ++r) keys.push_back(roundKey(liveBase_, round, r));
  std::vector<std::vector<LiveSummary>> byRank;
  try {
    store.set(keys[static_cast<size_t>(rank_)], toBytes(encodeLive(rank_, live_->summaries(*liveRules_, liveBase_))));
    store.wait(keys, state_->timeout);
    const std::vector<Bytes> values = store.multiGet(keys);
    for (int r = 0; r < worldSize_; ++r) byRank.push_back(decodeLive(r, toString(values[static_cast<size_t>(r)])));
  } catch (const Error& e) {
    raise(e.code(), where,
          "live-routing round " + std::to_string(round) + " (tune: live, every " + std::to_string(state_->liveEvery) +
              " sync points) did not complete: " + e.what(),
          "every rank of the group must call syncPoint() equally often; if a rank was lost, see its report");
  }
  if (round >= 2) store_->deleteKey(roundKey(liveBase_, round - 2, rank_));
  return byRank;
}

// The routes-only swap: the state with the edited table, at the next generation.
void ProcessGroup::Impl::liveSwitch(const LiveDecision& d, std::chrono::steady_clock::time_point started,
                                    int64_t startedUs) {
  RouteTable table = state_->routes;
  for (int b : d.dropped) table = table.withoutCandidate(b);
  if (!d.switches.empty()) table = table.rerouted(d.switches);
  auto next = std::make_shared<State>(*state_);
  next->routes = std::move(table);
  next->generation = state_->generation + 1;
  SwapRecord record;
  record.group = name_;
  record.rank = rank_;
  record.fromGeneration = state_->generation;
  record.toGeneration = next->generation;
  record.outcome = "rerouted";
  record.startedUs = startedUs;
  record.rerouted = d.lines;
  state_ = std::move(next);  // this thread alone reads and replaces it: the next call routes by the new table
  for (const LiveKey& k : d.switched) {
    live_->forget(k);
    ++liveRules_->flips[{k.op, k.dtype, k.reduceOp, k.sizeClass}];
  }
  record.totalUs = std::chrono::duration_cast<std::chrono::microseconds>(Steady::now() - started).count();
  record.commitUs = record.totalUs;
  publishStatusInfo();
  if (supervisor_) supervisor_->recordSwap(record);
  if (logger_)
    for (const auto& line : d.lines)
      logger_->info("syncPoint: live routing, generation " + std::to_string(state_->generation) + ": " + line);
}

}  // namespace commhost
