// SPDX-License-Identifier: Apache-2.0
// ProcessGroup::syncPoint: applying a config published to the world group at the same
// step on every rank.
//
// The publisher (`commhost run --watch`, or a test) writes, on the job store,
//   <group>/pending/<E>/yaml and <group>/pending/<E>/source, then <group>/pending/epoch = E
// with E counting up from 1. Each rank's poller thread reads <group>/pending/epoch every
// group.sync_poll and raises syncLatest_; syncPoint() compares it with the last epoch
// this rank finished, so nothing else happens until it grows. Then an agreement, on the
// group's own store (so a re-created group never reads an old one's), round R counting
// the agreements finished (alike on every rank, as every rank finishes each):
//   1. each rank posts sync/R/seen/<rank> = "epoch E seen at sync count s" (no waiting);
//   2. rank 0, at each later syncPoint, checks whether all ranks posted; when they have,
//      it writes sync/R/decision = "<E> <S> <J>" with E its own latest epoch, S its count + 2
//      and J the join requests it saw ("<group>/join/count", read by the same poller);
//   3. the other ranks read sync/R/decision at each syncPoint until it is there;
//   4. every rank, at the syncPoint whose count is S, admits the join requests up to J when
//      there are new ones (a membership round: group/membership.h), and otherwise loads the
//      YAML of epoch E and calls reconfigure(). Epochs published meanwhile, and an epoch
//      that waited for a join, start round R + 1.
// Rank 0 decides only after every rank posted, so every rank reads the decision at its
// next syncPoint; with every step waiting on a collective of the group no rank is more
// than one step ahead of rank 0, and S = count + 2 is still ahead of all of them. A rank
// that reads a decision already behind it throws (the others then fail in reconfigure,
// naming it): its workload skips sync points or steps without a collective.
//
// Threading: the poller thread touches only syncLatest_ (atomic), the job store (safe
// from any thread) and sync_->stop under sync_->mutex; everything else is the calling
// thread's.
#include "sync_point.h"

#include <sstream>

#include "commhost/errors.h"

namespace commhost {
namespace {

std::string latestKey(const std::string& group) { return group + "/pending/epoch"; }
std::string joinsKey(const std::string& group) { return group + "/join/count"; }
std::string epochKey(const std::string& group, uint64_t epoch, const char* what) {
  return group + "/pending/" + std::to_string(epoch) + "/" + what;
}

// The epoch number under `key`, 0 when there is none (or it is not a number).
uint64_t readEpoch(Store& store, const std::string& key) {
  if (!store.check({key})) return 0;
  const std::string text = toString(store.get(key));
  try {
    return std::stoull(text);
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace

void ProcessGroup::Impl::startSyncPoller() {
  const auto poll = setup_.config->host.getDuration("group.sync_poll");
  if (poll.count() <= 0) return;
  sync_ = std::make_unique<SyncAgreement>();
  sync_->poll = poll;
  // An epoch published before this group existed is news too: the ranks started on the
  // text `commhost run` read at launch (COMMHOST_CONFIG_TEXT), and an edit made while they
  // started was published after it. The latest is applied at the first syncPoint(), by
  // the same agreement as one published later (ranks that read it at different moments
  // still switch at one sync count).
  syncDone_ = 0;
  syncLatest_.store(readEpoch(*setup_.store, latestKey(name_)), std::memory_order_relaxed);
  joinLatest_.store(readEpoch(*setup_.store, joinsKey(name_)), std::memory_order_relaxed);
  sync_->poller = std::thread(
      [this, store = setup_.store, key = latestKey(name_), joins = joinsKey(name_), logger = logger_] {
        bool reported = false;  // a store that stops answering (the job ending) is logged once
        SyncAgreement& s = *sync_;
        for (;;) {
          {
            MutexLock lock(&s.mutex);
            if (!s.stop) s.wake.waitFor(&s.mutex, s.poll);
            if (s.stop) break;
          }
          // Unlocked: stopSyncPoller() need not wait for a store call to set `stop`.
          try {
            const uint64_t epoch = readEpoch(*store, key);
            if (epoch > syncLatest_.load(std::memory_order_relaxed))
              syncLatest_.store(epoch, std::memory_order_release);
            const uint64_t asked = readEpoch(*store, joins);
            if (asked > joinLatest_.load(std::memory_order_relaxed))
              joinLatest_.store(asked, std::memory_order_release);
            reported = false;
          } catch (const std::exception& e) {
            if (!reported && logger) logger->warn("sync poller: cannot read " + key + ": " + e.what());
            reported = true;
          }
        }
      });
}

void ProcessGroup::Impl::stopSyncPoller() {
  if (!sync_ || !sync_->poller.joinable()) return;
  {
    MutexLock lock(&sync_->mutex);
    sync_->stop = true;
  }
  sync_->wake.signalAll();
  sync_->poller.join();
}

void ProcessGroup::Impl::syncPointSlow() {
  if (!sync_) sync_ = std::make_unique<SyncAgreement>();  // a test raised syncLatest_ without a poller
  SyncAgreement& s = *sync_;
  const uint64_t count = syncCount_;
  const std::string round = "sync/" + std::to_string(s.round) + "/";
  if (!s.posted) {
    const uint64_t seen = syncLatest_.load(std::memory_order_acquire);
    store_->set(round + "seen/" + std::to_string(rank_),
                toBytes("epoch " + std::to_string(seen) + " seen at sync count " + std::to_string(count)));
    s.posted = true;
  }
  if (s.switchAt == 0) {
    if (rank_ == 0) {
      std::vector<std::string> seen(worldSize_);
      for (int r = 0; r < worldSize_; ++r) seen[r] = round + "seen/" + std::to_string(r);
      if (!store_->check(seen)) return;
      s.epoch = syncLatest_.load(std::memory_order_acquire);
      s.joins = joinLatest_.load(std::memory_order_acquire);
      s.switchAt = count + 2;
      store_->set(round + "decision",
                  toBytes(std::to_string(s.epoch) + " " + std::to_string(s.switchAt) + " " + std::to_string(s.joins)));
    } else {
      if (!store_->check({round + "decision"})) return;
      std::istringstream decision(toString(store_->get(round + "decision")));
      decision >> s.epoch >> s.switchAt >> s.joins;
    }
  }
  if (count < s.switchAt) return;
  const uint64_t epoch = s.epoch, switchAt = s.switchAt, joins = s.joins;
  // This agreement is over either way; the next epoch starts the next round.
  ++s.round;
  s.posted = false;
  s.epoch = s.switchAt = s.joins = 0;
  // Ranks that asked to join are admitted first; an epoch agreed with them waits for the
  // next agreement, which they take part in (they would miss this one's reconfigure()).
  const bool grow = joins > joinsDone_;
  const bool newEpoch = !grow && epoch > syncDone_;
  if (newEpoch) syncDone_ = epoch;
  if (count > switchAt) {
    syncError_ = "passed the switch point";
    ErrorContext where{name_, rank_, "syncPoint"};
    where.seq = seq();
    where.key = round + "decision";
    raise(ErrorCode::InvalidArgument, where,
          "epoch " + std::to_string(epoch) + " switches at sync count " + std::to_string(switchAt) +
              " but this rank learned it at sync count " + std::to_string(count) +
              ", past it: the other ranks reconfigure without this one",
          "call syncPoint() at every step boundary on every rank, with at least one collective of the group "
          "waited on in every step, so no rank runs two steps ahead of rank 0");
  }
  if (grow) growAt(joins);
  else if (newEpoch) applyEpoch(epoch);
}

void ProcessGroup::Impl::applyEpoch(uint64_t epoch) {
  const std::string what = "epoch " + std::to_string(epoch);
  std::shared_ptr<const Config> config;
  std::string source;
  try {
    source = toString(setup_.store->get(epochKey(name_, epoch, "source")));
    const std::string yaml = toString(setup_.store->get(epochKey(name_, epoch, "yaml")));
    // A copy: loading extends the registry's search path with the config's plugin_path;
    // reconfigure() still looks plugins up in the group's own registry.
    PluginRegistry registry = *setup_.registry;
    config = std::make_shared<Config>(loadConfigText(yaml, source, registry, setup_.overrides));
  } catch (const Error& e) {
    syncError_ = what + " (" + source + ") is invalid: " + e.what();
    if (logger_)
      logger_->error("syncPoint: " + syncError_ + "; staying on generation " + std::to_string(generation()) +
                     " (fix the file; the next edit is a new epoch)");
    // The others swap at this count: take part, refusing, so they fail now naming this
    // rank rather than after group.timeout.
    try {
      reconfigureOrRefuse(nullptr, {}, e.what());
    } catch (const Error& refused) {
      if (refused.code() == ErrorCode::Aborted || refused.code() == ErrorCode::PeerLost) throw;
    }
    return;
  }
  try {
    const ReconfigureReport report = reconfigure(config, {});
    syncError_.clear();
    if (logger_)
      logger_->info("syncPoint: applied " + what + " (" + source + ") at sync count " + std::to_string(syncCount_) +
                    ": generation " + std::to_string(report.generation));
  } catch (const Error& e) {
    if (e.code() == ErrorCode::Aborted || e.code() == ErrorCode::PeerLost) throw;
    syncError_ = what + " (" + source + ") rolled back: " + e.what();
    if (logger_) logger_->error("syncPoint: " + syncError_ + "; staying on generation " + std::to_string(generation()));
  }
}

}  // namespace commhost
