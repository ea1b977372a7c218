// SPDX-License-Identifier: Apache-2.0
#include <algorithm>

#include "commhost/errors.h"
#include "commhost/sdk/option_schema.h"
#include "commhost/store.h"

namespace commhost {

void HashStore::set(const std::string& key, const Bytes& value) {
  {
    MutexLock lock(&mutex_);
    map_[key] = value;
  }
  cv_.signalAll();
}

Bytes HashStore::get(const std::string& key) {
  MutexLock lock(&mutex_);
  waitLocked({key}, timeout_);
  return map_.at(key);
}

int64_t HashStore::add(const std::string& key, int64_t delta) {
  int64_t sum = delta;
  {
    MutexLock lock(&mutex_);
    auto it = map_.find(key);
    if (it != map_.end()) sum += counterValue(key, it->second);
    map_[key] = toBytes(std::to_string(sum));
  }
  cv_.signalAll();
  return sum;
}

Bytes HashStore::compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) {
  Bytes now;
  {
    MutexLock lock(&mutex_);
    auto it = map_.find(key);
    if (it == map_.end()) {
      if (!expected.empty()) return expected;  // c10d: absent key with a non-empty expectation
      map_[key] = desired;
      now = desired;
    } else {
      if (it->second == expected) it->second = desired;
      return it->second;
    }
  }
  cv_.signalAll();
  return now;
}

void HashStore::waitLocked(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    size_t present = 0;  // a loop, not all_of: the analysis does not see the lock inside a lambda
    for (const auto& k : keys) present += map_.count(k);
    if (present == keys.size()) return;
    if (!cv_.waitUntil(&mutex_, deadline) && std::chrono::steady_clock::now() >= deadline) break;
  }
  std::string missing;
  for (const auto& k : keys)
    if (!map_.count(k)) missing += (missing.empty() ? "'" : ", '") + k + "'";
  throw TimeoutError("store wait timed out after " + formatDuration(timeout) + "; keys not set: " + missing +
                     ". The rank that sets them may have failed or not reached this point");
}

void HashStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  MutexLock lock(&mutex_);
  waitLocked(keys, timeout);
}

bool HashStore::check(const std::vector<std::string>& keys) {
  MutexLock lock(&mutex_);
  for (const auto& k : keys)
    if (!map_.count(k)) return false;
  return true;
}

bool HashStore::deleteKey(const std::string& key) {
  MutexLock lock(&mutex_);
  return map_.erase(key) != 0;
}

int64_t HashStore::numKeys() {
  MutexLock lock(&mutex_);
  return static_cast<int64_t>(map_.size());
}

void HashStore::append(const std::string& key, const Bytes& value) {
  {
    MutexLock lock(&mutex_);
    Bytes& slot = map_[key];
    slot.insert(slot.end(), value.begin(), value.end());
  }
  cv_.signalAll();
}

}  // namespace commhost
