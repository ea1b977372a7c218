// SPDX-License-Identifier: Apache-2.0
// Internal: a group's config generation (State), the backends an abort must reach
// (AbortTargets), and the store a hot swap builds its backends through (SwapStore).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../supervisor/record_names_memo.h"
#include "commhost/mutex.h"
#include "commhost/process_group.h"
#include "impl.h"

namespace commhost {

// Immutable once published: reconfigure() builds a whole new one and replaces the
// group's pointer, so a call (which takes the pointer once) never sees half a swap.
struct ProcessGroup::State {
  std::shared_ptr<const Config> config;
  // config->timeout(), read once: the per-op path must not look keys up by name (a
  // string-keyed map lookup was 5% of an 8 B op's host cost).
  std::chrono::milliseconds timeout{0};
  RouteTable routes;
  std::vector<std::shared_ptr<Backend>> backends;  // indexed like routes.backendNames(); null if unavailable
  std::vector<std::string> unavailable;            // why backends[i] is null
  std::vector<bool> composite;                     // backends[i] was built of other backends (makeBackend)
  // Per backend, as `backends`: the supervisor's record names (mutable: a memo, set by
  // the first op that records; a copy of the State starts with empty ones).
  std::vector<supervisor::RecordNamesMemo> recordNames;
  uint64_t generation = 0;
  uint64_t liveEvery = 0;  // tune.live_every when a route has tune: live (live_routes.h); 0: none
  uint64_t tableBase = 0;  // the generation whose config built `routes` (a live switch keeps it)
};

// Shared by the group and the supervisor's abortGroup (which may run on the watchdog's
// thread while the group's calling thread swaps): weak references, so an abort never
// keeps a backend alive, and the list covers the backends a swap is still building.
struct ProcessGroup::AbortTargets {
  Mutex mutex;
  std::vector<std::weak_ptr<Backend>> current GUARDED_BY(mutex);   // the committed generation's
  std::vector<std::weak_ptr<Backend>> building GUARDED_BY(mutex);  // a swap's, until commit or rollback
  std::shared_ptr<std::atomic<bool>> aborted;
  std::string reason GUARDED_BY(mutex);  // the first abort's, for the errors of later calls

  void set(const std::vector<std::shared_ptr<Backend>>& backends) EXCLUDES(mutex);
  void addBuilding(const std::shared_ptr<Backend>& backend) EXCLUDES(mutex);
  void clearBuilding() EXCLUDES(mutex);
  void abortAll(const std::string& why) EXCLUDES(mutex);
  std::string why() EXCLUDES(mutex);  // the first abort's reason ("" before any)
};

// The group store as a swap's backends and protocol see it: get() and wait() wait in
// slices, and between slices `stop` may end the wait (a rank reported failure, a peer was
// lost, the group was aborted) by throwing. A wait whose keys arrive returns at once: the
// slices cost nothing on the success path. A backend may keep the store it was built
// with (and so this check) for its whole life: `stop` shares what it reads, never borrows.
class SwapStore final : public StoreWrapper {
 public:
  // Called between slices: returns to go on waiting, or throws why the wait ends.
  using StopCheck = std::function<void()>;
  // Record: keep the keys written through it until stopRecording() (a swap's build store);
  // the others do not keep them (the group's KeyLedger below records what stays).
  enum class Record { No, UntilStopped };
  SwapStore(StorePtr base, StopCheck stop, Record record = Record::No);
  using Store::wait;
  void set(const std::string& key, const Bytes& value) override {
    record(key);
    StoreWrapper::set(key, value);
  }
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override {
    record(key);
    return StoreWrapper::add(key, delta);
  }
  Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    record(key);
    return StoreWrapper::compareSet(key, expected, desired);
  }
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  std::vector<Bytes> multiGet(const std::vector<std::string>& keys) override;
  void multiSet(const std::vector<std::string>& keys, const std::vector<Bytes>& values) override {
    for (const auto& k : keys) record(k);
    StoreWrapper::multiSet(keys, values);
  }
  void append(const std::string& key, const Bytes& value) override {
    record(key);
    StoreWrapper::append(key, value);
  }

  // The keys written through this store until now (the swap's build and decision), after
  // which it records no more: what the attempt leaves in the store for the next attempt
  // to delete, once every rank is past this one. Later writes (a backend's own, at its
  // first op or a split) are the backend's business.
  std::vector<std::string> stopRecording() EXCLUDES(mutex_);

 private:
  void record(const std::string& key) EXCLUDES(mutex_);
  StopCheck stop_;
  Mutex mutex_;  // backends may write from threads of their own while being built
  bool recording_ GUARDED_BY(mutex_);
  std::vector<std::string> written_ GUARDED_BY(mutex_);
};

// A route list passes over a backend its plugin cannot run here (RouteTable::build), so
// ranks that disagree on which listed backends can run would send one op to different
// backends and wait for each other forever: they must agree, as on the config. The first
// rank to reach `key` publishes its set of such backends, each later one compares; a
// difference is a ConfigError naming both sides. A backend only ever named alone on its
// route is not compared (a call to it fails where it cannot run). Group creation and each
// swap attempt check it.
void checkSameAvailability(Store& store, const std::string& key, const Config& config, const PluginRegistry& registry,
                           const ErrorContext& where);

}  // namespace commhost
