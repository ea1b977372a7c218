// SPDX-License-Identifier: Apache-2.0
#include "group_state.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "commhost/errors.h"
#include "commhost/registry.h"
#include "commhost/sdk/option_schema.h"

namespace commhost {

void ProcessGroup::AbortTargets::set(const std::vector<std::shared_ptr<Backend>>& backends) {
  MutexLock lock(&mutex);
  current.assign(backends.begin(), backends.end());
  building.clear();
}

void ProcessGroup::AbortTargets::addBuilding(const std::shared_ptr<Backend>& backend) {
  MutexLock lock(&mutex);
  building.push_back(backend);
}

void ProcessGroup::AbortTargets::clearBuilding() {
  MutexLock lock(&mutex);
  building.clear();
}

void ProcessGroup::AbortTargets::abortAll(const std::string& why) {
  {
    // The reason before the flag: a call that sees the flag finds the reason.
    MutexLock lock(&mutex);
    if (reason.empty()) reason = why;
  }
  aborted->store(true, std::memory_order_release);
  std::vector<std::shared_ptr<Backend>> targets;
  {
    // Locked only to copy: a backend's abort() may take its own locks or wake threads.
    MutexLock lock(&mutex);
    for (const auto* list : {&current, &building})
      for (const auto& weak : *list)
        if (auto b = weak.lock()) targets.push_back(std::move(b));
  }
  for (auto& b : targets) b->abort(why);
}

std::string ProcessGroup::AbortTargets::why() {
  MutexLock lock(&mutex);
  return reason;
}

namespace {
// Short enough that a failure or lost peer ends the others' waits quickly, long enough
// that the extra store calls while waiting cost nothing measurable.
constexpr std::chrono::milliseconds kSlice{50};
}  // namespace

SwapStore::SwapStore(StorePtr base, StopCheck stop, Record record)
    : StoreWrapper(std::move(base)), stop_(std::move(stop)), recording_(record == Record::UntilStopped) {}

void SwapStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                            std::chrono::steady_clock::now());
    try {
      StoreWrapper::wait(keys, std::max(std::chrono::milliseconds(1), std::min(left, kSlice)));
      return;
    } catch (const TimeoutError&) {
      if (left <= kSlice) {
        // The base store's message names the last slice's length: say the whole wait.
        std::string missing;
        for (const auto& k : keys)
          if (!check({k})) missing += (missing.empty() ? "" : ", ") + k;
        throw TimeoutError("store wait timed out after " + formatDuration(timeout) + "; keys not set: " + missing);
      }
    }
    stop_();
  }
}

void SwapStore::record(const std::string& key) {
  MutexLock lock(&mutex_);
  if (recording_) written_.push_back(key);
}

std::vector<std::string> SwapStore::stopRecording() {
  MutexLock lock(&mutex_);
  recording_ = false;
  std::sort(written_.begin(), written_.end());
  written_.erase(std::unique(written_.begin(), written_.end()), written_.end());
  return std::move(written_);
}

Bytes SwapStore::get(const std::string& key) {
  wait({key}, timeout_);
  return StoreWrapper::get(key);
}

std::vector<Bytes> SwapStore::multiGet(const std::vector<std::string>& keys) {
  wait(keys, timeout_);
  return StoreWrapper::multiGet(keys);
}

void checkSameAvailability(Store& store, const std::string& key, const Config& config, const PluginRegistry& registry,
                           const ErrorContext& where) {
  std::set<std::string> listed;
  for (const auto& route : config.routes)
    if (!route.fallback.empty())
      for (const auto& name : route.backends()) listed.insert(name);
  std::string unable, reasons;
  for (const auto& [backendName, ref] : config.backends) {
    if (!listed.count(backendName)) continue;
    const PluginEntry* e = registry.find(ref.plugin);
    const std::string why = !e ? "plugin '" + ref.plugin + "' not found" : e->unavailable;
    if (why.empty()) continue;
    unable += (unable.empty() ? "" : ",") + backendName;
    reasons += (reasons.empty() ? "" : "; ") + ("'" + backendName + "': " + why);
  }
  if (unable.empty()) unable = "-";
  const std::string line = unable + " rank " + std::to_string(where.rank) +
                           (reasons.empty() ? "" : " (" + reasons + ")");
  const std::string first = toString(store.compareSet(key, {}, toBytes(line)));
  const std::string theirs = first.substr(0, first.find(' '));
  if (theirs != unable)
    raise(ErrorCode::Config, where,
          "ranks differ in which backends can run: on this rank " +
              (unable == "-" ? std::string("every backend can") : "not " + reasons) + ", but on " +
              first.substr(first.find(' ') + 1) + (theirs == "-" ? ": every backend can" : ""),
          "a route's backend list would send the same op to different backends on different ranks; make the "
          "plugin usable on every rank (`commhost plugins list` says why not) or remove it from the config");
}

}  // namespace commhost
