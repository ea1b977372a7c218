// SPDX-License-Identifier: Apache-2.0
#include "key_ledger.h"

#include <vector>

#include "../supervisor/messages.h"

namespace commhost {

void KeyLedger::note(const std::string& key) {
  MutexLock lock(&mutex_);
  written_.insert(key);  // most writes repeat a key (heartbeats): no allocation then
}

bool KeyLedger::deleteKey(const std::string& key) {
  {
    MutexLock lock(&mutex_);
    written_.erase(key);
  }
  return StoreWrapper::deleteKey(key);
}

void KeyLedger::publishManifest(int global) {
  std::string list;
  {
    MutexLock lock(&mutex_);
    for (const auto& key : written_) list += key + "\n";
  }
  set(manifestKey(global), toBytes(list));
}

void KeyLedger::adoptManifest(int global) {
  const std::string key = manifestKey(global);
  if (!check({key})) return;
  const std::string list = toString(get(key));
  MutexLock lock(&mutex_);
  written_.insert(key);
  for (auto& line : supervisor::wire::splitLines(list))
    if (!line.empty()) written_.insert(std::move(line));
}

size_t KeyLedger::size() const {
  MutexLock lock(&mutex_);
  return written_.size();
}

size_t KeyLedger::sweep(const std::function<bool(const std::string&)>& keep) {
  std::vector<std::string> doomed;
  {
    MutexLock lock(&mutex_);
    for (auto it = written_.begin(); it != written_.end();) {
      if (keep(*it)) {
        ++it;
        continue;
      }
      doomed.push_back(*it);
      it = written_.erase(it);
    }
  }
  // Outside the lock: each delete is a store round trip.
  for (const auto& key : doomed) StoreWrapper::deleteKey(key);
  return doomed.size();
}

}  // namespace commhost
