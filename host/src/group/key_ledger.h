// SPDX-License-Identifier: Apache-2.0
// Internal: KeyLedger, the store of one group generation as this rank writes it, with a
// ledger of the keys it wrote, so that once every member is past the generation its keys
// can go (elastic membership: each round starts a generation under a new store path, and
// the old one's keys, heartbeats, rendezvous of every backend, the round's own, would
// otherwise stay in the job's store for the whole job).
//
// Every write (set, add, compareSet, append, multiSet) records its key; deleteKey drops
// it. The ledger holds the keys the generation's store holds from this rank, so it grows
// only as that does. Keys are as this store sees them (relative to the generation's path).
//
// A rank cannot sweep what it wrote once it is gone (killed, or left): each rank publishes
// its ledger as a manifest (manifestKey, after each build), which the members then adopt
// into their own ledgers and sweep with theirs.
//
// Threading: any thread (the caller's, the heartbeat's, a backend's own threads), as the
// store itself.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "commhost/mutex.h"
#include "commhost/store.h"

namespace commhost {

class KeyLedger final : public StoreWrapper {
 public:
  explicit KeyLedger(StorePtr base) : StoreWrapper(std::move(base)) {}
  using Store::wait;
  void set(const std::string& key, const Bytes& value) override {
    note(key);
    StoreWrapper::set(key, value);
  }
  int64_t add(const std::string& key, int64_t delta) override {
    note(key);
    return StoreWrapper::add(key, delta);
  }
  Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    note(key);
    return StoreWrapper::compareSet(key, expected, desired);
  }
  void append(const std::string& key, const Bytes& value) override {
    note(key);
    StoreWrapper::append(key, value);
  }
  void multiSet(const std::vector<std::string>& keys, const std::vector<Bytes>& values) override {
    for (const auto& k : keys) note(k);
    StoreWrapper::multiSet(keys, values);
  }
  bool deleteKey(const std::string& key) override EXCLUDES(mutex_);

  size_t size() const EXCLUDES(mutex_);
  // Records `key` as if this rank wrote it, so that sweep() deletes it: a key another
  // rank wrote that this one knows is done with (a removed rank's heartbeat).
  void adopt(const std::string& key) EXCLUDES(mutex_) { note(key); }
  // Writes the keys this rank wrote until now (its backends' rendezvous above all) under
  // manifestKey(global), for the members to sweep should this rank go.
  void publishManifest(int global) EXCLUDES(mutex_);
  // Adopts the keys global rank `global` listed in its manifest, and the manifest; nothing
  // when it published none.
  void adoptManifest(int global) EXCLUDES(mutex_);
  static std::string manifestKey(int global) { return "keys/" + std::to_string(global); }
  // Deletes every key this rank wrote, except those `keep` names (they stay in the ledger
  // too); returns how many it deleted. A key another rank deleted first counts as gone.
  // Store errors propagate: the caller decides whether a failed cleanup matters.
  size_t sweep(const std::function<bool(const std::string&)>& keep) EXCLUDES(mutex_);

 private:
  void note(const std::string& key) EXCLUDES(mutex_);
  mutable Mutex mutex_;
  std::set<std::string> written_ GUARDED_BY(mutex_);
};

// A generation whose keys the next membership round's commit sweeps: its ledger, its
// members (global ranks, by rank), the membership rounds run in its store (first to the
// one that ended it; each leaves an alive key per rank) and how many sync agreements it
// started (each leaves a key per rank).
struct GenerationKeys {
  std::shared_ptr<KeyLedger> ledger;
  std::vector<int> globals;
  uint64_t firstRound = 0;
  uint64_t endingRound = 0;
  uint64_t syncRounds = 0;
};

}  // namespace commhost
