// SPDX-License-Identifier: Apache-2.0
#include "counting_store.h"

namespace commhost {

const char* storeOpName(StoreOp op) {
  static constexpr const char* kNames[kNumStoreOps] = {
      "set", "get", "add", "compare_set", "wait", "check", "delete", "num_keys", "multi_get", "multi_set", "append"};
  return kNames[static_cast<size_t>(op)];
}

std::map<std::string, uint64_t> StoreCounts::snapshot(bool failures) const {
  std::map<std::string, uint64_t> out;
  const auto& from = failures ? failed : calls;
  for (size_t i = 0; i < kNumStoreOps; ++i)
    if (const uint64_t n = from[i].load(std::memory_order_relaxed)) out[storeOpName(static_cast<StoreOp>(i))] = n;
  return out;
}

template <class F> auto CountingStore::counted(StoreOp op, F&& call) -> decltype(call()) {
  const auto i = static_cast<size_t>(op);
  counts_->calls[i].fetch_add(1, std::memory_order_relaxed);
  try {
    return call();
  } catch (...) {
    counts_->failed[i].fetch_add(1, std::memory_order_relaxed);
    throw;
  }
}

void CountingStore::set(const std::string& key, const Bytes& value) {
  counted(StoreOp::Set, [&] { StoreWrapper::set(key, value); });
}
Bytes CountingStore::get(const std::string& key) {
  return counted(StoreOp::Get, [&] { return StoreWrapper::get(key); });
}
int64_t CountingStore::add(const std::string& key, int64_t delta) {
  return counted(StoreOp::Add, [&] { return StoreWrapper::add(key, delta); });
}
Bytes CountingStore::compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) {
  return counted(StoreOp::CompareSet, [&] { return StoreWrapper::compareSet(key, expected, desired); });
}
void CountingStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  counted(StoreOp::Wait, [&] { StoreWrapper::wait(keys, timeout); });
}
bool CountingStore::check(const std::vector<std::string>& keys) {
  return counted(StoreOp::Check, [&] { return StoreWrapper::check(keys); });
}
bool CountingStore::deleteKey(const std::string& key) {
  return counted(StoreOp::DeleteKey, [&] { return StoreWrapper::deleteKey(key); });
}
int64_t CountingStore::numKeys() {
  return counted(StoreOp::NumKeys, [&] { return StoreWrapper::numKeys(); });
}
std::vector<Bytes> CountingStore::multiGet(const std::vector<std::string>& keys) {
  return counted(StoreOp::MultiGet, [&] { return StoreWrapper::multiGet(keys); });
}
void CountingStore::multiSet(const std::vector<std::string>& keys, const std::vector<Bytes>& values) {
  counted(StoreOp::MultiSet, [&] { StoreWrapper::multiSet(keys, values); });
}
void CountingStore::append(const std::string& key, const Bytes& value) {
  counted(StoreOp::Append, [&] { StoreWrapper::append(key, value); });
}

}  // namespace commhost
