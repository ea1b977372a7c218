// SPDX-License-Identifier: Apache-2.0
#include <algorithm>

#include "commhost/errors.h"
#include "commhost/option_schema.h"
#include "commhost/store.h"

namespace commhost {

void HashStore::set(const std::string& key, const Bytes& value) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    map_[key] = value;
  }
  cv_.notify_all();
}

Bytes HashStore::get(const std::string& key) {
  std::unique_lock<std::mutex> lock(mutex_);
  waitLocked(lock, {key}, timeout_);
  return map_.at(key);
}

int64_t HashStore::add(const std::string& key, int64_t delta) {
  int64_t sum = delta;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = map_.find(key);
    if (it != map_.end()) sum += counterValue(key, it->second);
    map_[key] = toBytes(std::to_string(sum));
  }
  cv_.notify_all();
  return sum;
}

Bytes HashStore::compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) {
  Bytes now;
  {
    std::lock_guard<std::mutex> lock(mutex_);
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
  cv_.notify_all();
  return now;
}

void HashStore::waitLocked(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys,
                           std::chrono::milliseconds timeout) {
  auto present = [&] {
    return std::all_of(keys.begin(), keys.end(), [&](const std::string& k) { return map_.count(k) != 0; });
  };
  if (cv_.wait_for(lock, timeout, present)) return;
  std::string missing;
  for (const auto& k : keys)
    if (!map_.count(k)) missing += (missing.empty() ? "'" : ", '") + k + "'";
  throw TimeoutError("store wait timed out after " + formatDuration(timeout) + "; keys not set: " + missing +
                     ". The rank that sets them may have failed or not reached this point");
}

void HashStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  waitLocked(lock, keys, timeout);
}

bool HashStore::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::all_of(keys.begin(), keys.end(), [&](const std::string& k) { return map_.count(k) != 0; });
}

bool HashStore::deleteKey(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  return map_.erase(key) != 0;
}

int64_t HashStore::numKeys() {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int64_t>(map_.size());
}

void HashStore::append(const std::string& key, const Bytes& value) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Bytes& slot = map_[key];
    slot.insert(slot.end(), value.begin(), value.end());
  }
  cv_.notify_all();
}

}  // namespace commhost
