// SPDX-License-Identifier: Apache-2.0
#include "shrink.h"

#include <algorithm>
#include <map>
#include <set>
#include <thread>

#include "../supervisor/group_monitor.h"
#include "../supervisor/supervisor.h"
#include "commhost/errors.h"

namespace commhost {
namespace {

// Short enough that the last survivor to arrive is seen at once, long enough that the
// polling costs the store nothing measurable (one check per rank per slice).
constexpr std::chrono::milliseconds kPollSlice{20};

std::string ranksText(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

}  // namespace

std::string encodeMembers(const std::vector<int>& members) {
  std::string out;
  for (int r : members) out += (out.empty() ? "" : ",") + std::to_string(r);
  return out;
}

std::vector<int> decodeMembers(const std::string& text, int worldSize, const std::string& key) {
  std::vector<int> out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    char* end = nullptr;
    const long r = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || r < 0 || r >= worldSize || (!out.empty() && r <= out.back()))
      throw StoreError("the store's '" + key + "' holds '" + text + "', not ascending ranks below " +
                       std::to_string(worldSize) +
                       ": another program wrote that key. Next: give each job a store (or group name) of its own");
    out.push_back(static_cast<int>(r));
    at = comma + 1;
  }
  return out;
}

ShrinkRound::ShrinkRound(ProcessGroup& group, const ShrinkOptions& options)
    : g_(group),
      timeout_(options.timeout.count() > 0 ? options.timeout : g_.state_->timeout),
      round_(g_.shrinkRounds_++),
      prefix_("shrink/" + std::to_string(round_) + "/"),
      where_{g_.name_, g_.rank_, "shrink"},
      minRanks_(static_cast<int>(g_.setup_.config->host.getInt("supervisor.min_ranks"))),
      oldRank_(g_.rank_),
      oldSize_(g_.worldSize_),
      oldGlobal_(g_.globalRanks_),
      oldStore_(g_.store_) {
  report_.removed.clear();
}

std::chrono::microseconds ShrinkRound::since(Steady::time_point t) const {
  return std::chrono::duration_cast<std::chrono::microseconds>(Steady::now() - t);
}

ShrinkReport ShrinkRound::run() {
  if (g_.foreignIssue_.load(std::memory_order_acquire) > 0)
    raise(ErrorCode::InvalidArgument, where_,
          "called inside a span of beginForeignIssue() (a Reducer iteration): other threads may still issue ops "
          "on this group",
          "finish or drop the Reducer iteration (destroy the Reducer), then call shrink()");
  agree();
  build();
  confirm();
  commit();
  return report_;
}

std::vector<int> ShrinkRound::posted(bool& settled) const {
  // Gone for good: lost (the heartbeat's or a backend's verdict) or left (destroyed its
  // group). Without the supervisor neither is known: the timeout alone ends the wait.
  std::map<int, std::string> lost;
  std::set<int> left;
  if (g_.monitor_) {
    lost = g_.monitor_->lost();
    left = g_.monitor_->left();
  }
  std::vector<int> out;
  settled = true;
  for (int r = 0; r < oldSize_; ++r) {
    if (r == oldRank_ || oldStore_->check({prefix_ + "alive/" + std::to_string(r)})) {
      out.push_back(r);
    } else if (!lost.count(r) && !left.count(r)) {
      settled = false;  // neither here nor gone: wait for it
    }
  }
  return out;
}

void ShrinkRound::agree() {
  const auto t = Steady::now();
  deadline_ = t + timeout_;
  oldStore_->set(prefix_ + "alive/" + std::to_string(oldRank_), toBytes(std::to_string(g_.seq())));
  const std::string decisionKey = prefix_ + "decision";
  std::vector<int> proposal;
  for (;;) {
    bool settled = false;
    proposal = posted(settled);
    if (settled || Steady::now() >= deadline_ || oldStore_->check({decisionKey})) break;
    std::this_thread::sleep_for(kPollSlice);
  }
  const std::string decided = toString(oldStore_->compareSet(decisionKey, {}, toBytes(encodeMembers(proposal))));
  members_ = decodeMembers(decided, oldSize_, decisionKey);
  for (int r = 0; r < oldSize_; ++r)
    if (!std::binary_search(members_.begin(), members_.end(), r)) report_.removed.push_back(r);
  checkMembers();
  // The group continues from the highest seq a member issued, so that every member's
  // next op gets the same seq (a member may have issued one more before it failed).
  uint64_t seq = 0;
  for (int r : members_) {
    const std::string v = toString(oldStore_->get(prefix_ + "alive/" + std::to_string(r)));
    seq = std::max<uint64_t>(seq, std::strtoull(v.c_str(), nullptr, 10));
  }
  report_.seq = seq;
  report_.agree = since(t);
}

std::string ShrinkRound::removedText() const {
  std::string out;
  for (int r : report_.removed) out += (out.empty() ? "" : ", ") + std::to_string(oldGlobal_[r]);
  return out;
}

void ShrinkRound::checkMembers() {
  const uint64_t generation = g_.state_->generation;
  if (!std::binary_search(members_.begin(), members_.end(), oldRank_)) {
    const std::string why = "this rank was removed from group " + g_.name_ + " at generation " +
                            std::to_string(generation) + ": the survivors (ranks " + ranksText(members_) +
                            ") decided without it, as it had not taken part in shrink round " + std::to_string(round_) +
                            " within " + formatDuration(timeout_) + " (stopped, or too slow to reach shrink())";
    g_.abortTargets_->abortAll(why);
    record("removed", why);
    raise(ErrorCode::Aborted, where_, why,
          "this process can no longer take part in the job: end it (a launcher with restarts may start a new one)");
  }
  if (static_cast<int>(members_.size()) < minRanks_) {
    const std::string why = "only " + std::to_string(members_.size()) + " of " + std::to_string(oldSize_) +
                            " ranks are left (lost: " + removedText() + "), below supervisor.min_ranks " +
                            std::to_string(minRanks_) + "; the group stays aborted at generation " +
                            std::to_string(generation);
    record("refused", why);
    raise(ErrorCode::PeerLost, where_, why,
          "restart the job (from its last checkpoint) once the lost ranks' hosts are back, or lower "
          "supervisor.min_ranks");
  }
}

void ShrinkRound::build() {
  const auto t = Steady::now();
  const auto it = std::find(members_.begin(), members_.end(), oldRank_);
  g_.rank_ = static_cast<int>(it - members_.begin());
  g_.worldSize_ = static_cast<int>(members_.size());
  g_.globalRanks_.clear();
  for (int r : members_) g_.globalRanks_.push_back(oldGlobal_[r]);
  g_.store_ = std::make_shared<PrefixStore>("m" + std::to_string(round_), oldStore_);
  // The backends' rendezvous stops as soon as a member reports failure (a second peer
  // lost while building), instead of waiting for it until the timeout.
  auto stop = [store = oldStore_, key = prefix_ + "failed"] {
    if (store->check({key})) throw PeerLostError(toString(store->get(key)));
  };
  auto buildStore = std::make_shared<SwapStore>(g_.store_, stop);
  try {
    next_ = g_.buildState(g_.setup_.config, *g_.setup_.registry, nullptr, {}, "", buildStore, g_.state_->generation + 1,
                          nullptr, nullptr);
  } catch (const std::exception& e) {
    const auto* error = dynamic_cast<const Error*>(&e);
    failRound(error ? error->code() : ErrorCode::Plugin, std::string("building the backends failed: ") + e.what());
  }
  report_.build = since(t);
}

void ShrinkRound::confirm() {
  const auto t = Steady::now();
  deadline_ = t + timeout_;
  g_.store_->set("built/" + std::to_string(g_.rank_), toBytes("1"));
  const std::string failedKey = prefix_ + "failed";
  for (int waiting = 0;;) {
    if (oldStore_->check({failedKey})) failRound(ErrorCode::PeerLost, toString(oldStore_->get(failedKey)));
    waiting = 0;
    for (int r = 0; r < g_.worldSize_; ++r)
      if (!g_.store_->check({"built/" + std::to_string(r)})) ++waiting;
    if (waiting == 0) break;
    // A member lost after the decision (the old generation's heartbeat still watches).
    if (g_.monitor_)
      for (const auto& [peer, why] : g_.monitor_->lost())
        if (peer >= 0 && std::binary_search(members_.begin(), members_.end(), peer))
          failRound(ErrorCode::PeerLost, "member " + std::to_string(oldGlobal_[peer]) + " was lost: " + why);
    if (Steady::now() >= deadline_)
      failRound(ErrorCode::Timeout,
                std::to_string(waiting) + " member(s) did not confirm their build within " + formatDuration(timeout_));
    std::this_thread::sleep_for(kPollSlice);
  }
  report_.confirm = since(t);
}

void ShrinkRound::failRound(ErrorCode code, const std::string& why) {
  try {
    oldStore_->compareSet(prefix_ + "failed", {}, toBytes("rank " + std::to_string(oldGlobal_[oldRank_]) + ": " + why));
  } catch (const std::exception&) {
    // The store is gone too: the peers fail on their own waits.
  }
  g_.abortTargets_->abortAll("shrink round " + std::to_string(round_) + " failed: " + why);  // what was built
  g_.abortTargets_->clearBuilding();
  next_.reset();
  g_.rank_ = oldRank_;
  g_.worldSize_ = oldSize_;
  g_.globalRanks_ = oldGlobal_;
  g_.store_ = oldStore_;
  record("failed", why);
  raise(code, where_, "shrink round " + std::to_string(round_) + " failed: " + why,
        "call shrink() again on every survivor: the next round agrees on who is left");
}

void ShrinkRound::commit() {
  const auto t = Steady::now();
  std::shared_ptr<const ProcessGroup::State> old = std::move(g_.state_);
  g_.state_ = std::move(next_);
  g_.abortTargets_->clearBuilding();
  // The new generation answers to aborts of its own: the old one stays aborted, and a
  // late abort from the old generation's watchdog (it may still be polling) reaches only
  // the old backends.
  auto targets = std::make_shared<ProcessGroup::AbortTargets>();
  g_.aborted_ = std::make_shared<std::atomic<bool>>(false);
  targets->aborted = g_.aborted_;
  targets->set(g_.state_->backends);
  g_.abortTargets_ = std::move(targets);
  g_.seq_.store(report_.seq, std::memory_order_relaxed);
  g_.logger_ = std::make_shared<Logger>("commhost", "group " + g_.name_ + " rank " + std::to_string(g_.rank_));
  // The supervisor watches the new membership; the lease on it is taken before the old
  // one is given back, so its flight recorder (and its threads) carry on.
  auto oldSupervisor = std::move(g_.supervisor_);
  auto oldMonitor = std::move(g_.monitor_);
  g_.startSupervision();
  if (oldSupervisor) {
    if (g_.supervisor_) g_.supervisor_->moveHooks(oldMonitor.get(), g_.monitor_.get());
    supervisor::Supervisor::release(std::move(oldSupervisor), oldMonitor.get());
  }
  for (const auto& b : old->backends) {
    if (!b) continue;
    try {
      b->shutdown();  // aborted: its works have failed
    } catch (const std::exception& e) {
      g_.logger_->warn(std::string("a backend of the old membership failed to shut down: ") + e.what());
    }
  }
  old.reset();
  report_.generation = g_.state_->generation;
  report_.rank = g_.rank_;
  report_.worldSize = g_.worldSize_;
  report_.oldRanks = members_;
  for (int r : report_.removed) report_.removedGlobal.push_back(oldGlobal_[r]);
  report_.commit = since(t);
  record("shrunk", "");
  g_.logger_->warn("shrank from " + std::to_string(oldSize_) + " to " + std::to_string(g_.worldSize_) + " ranks (" +
                   (report_.removed.empty() ? "nobody removed" : "removed " + removedText()) + "; this rank was " +
                   std::to_string(oldRank_) + ") at generation " + std::to_string(report_.generation) + " in " +
                   std::to_string(report_.total.count() / 1000) + " ms");
}

void ShrinkRound::record(const std::string& outcome, const std::string& error) {
  report_.total = since(t0_);
  if (!g_.supervisor_) return;
  supervisor::MembershipRecord r;
  r.group = g_.name_;
  r.rankBefore = oldRank_;
  r.rankAfter = outcome == "shrunk" ? g_.rank_ : -1;
  r.worldBefore = oldSize_;
  r.worldAfter = outcome == "shrunk" ? g_.worldSize_ : oldSize_;
  r.fromGeneration = outcome == "shrunk" ? g_.state_->generation - 1 : g_.state_->generation;
  r.toGeneration = g_.state_->generation;
  for (int old : report_.removed) r.removed.push_back(oldGlobal_[old]);
  r.outcome = outcome;
  r.error = error;
  r.startedUs = std::chrono::duration_cast<std::chrono::microseconds>(
                    std::chrono::system_clock::now().time_since_epoch() - (Steady::now() - t0_))
                    .count();
  r.agreeUs = report_.agree.count();
  r.buildUs = report_.build.count();
  r.confirmUs = report_.confirm.count();
  r.commitUs = report_.commit.count();
  r.totalUs = report_.total.count();
  g_.supervisor_->recordMembership(std::move(r));
}

ShrinkReport ProcessGroup::shrink(const ShrinkOptions& options) { return ShrinkRound(*this, options).run(); }

}  // namespace commhost
