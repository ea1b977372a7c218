// SPDX-License-Identifier: Apache-2.0
// CountingStore: the job's store as a process's groups use it, counting each call and each
// call that failed, by op. The status record carries the counts (ProcessStatus::
// storeRequests / storeFailures) and `commhost run --metrics` exports them
// (commhost_store_requests_total): how hard a job leans on its store, and whether the store
// is failing it.
//
// Threading: any thread may call the store at once; the counters are relaxed atomics,
// read by the heartbeat thread (a snapshot may mix counts from a few calls apart).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "commhost/store.h"

namespace commhost {

enum class StoreOp : uint8_t { Set, Get, Add, CompareSet, Wait, Check, DeleteKey, NumKeys, MultiGet, MultiSet, Append };
constexpr size_t kNumStoreOps = 11;
const char* storeOpName(StoreOp op);  // "set", "compare_set", ...

struct StoreCounts {
  std::array<std::atomic<uint64_t>, kNumStoreOps> calls{};
  std::array<std::atomic<uint64_t>, kNumStoreOps> failed{};  // threw (a timeout included)
  // By op name, the ops called at least once.
  std::map<std::string, uint64_t> snapshot(bool failures) const;
};

class CountingStore final : public StoreWrapper {
 public:
  explicit CountingStore(StorePtr base) : StoreWrapper(std::move(base)) {}
  using Store::wait;
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool deleteKey(const std::string& key) override;
  int64_t numKeys() override;
  std::vector<Bytes> multiGet(const std::vector<std::string>& keys) override;
  void multiSet(const std::vector<std::string>& keys, const std::vector<Bytes>& values) override;
  void append(const std::string& key, const Bytes& value) override;

  // Shared, so the supervisor's status publisher may outlive the store.
  const std::shared_ptr<const StoreCounts>& counts() const { return constCounts_; }

 private:
  template <class F> auto counted(StoreOp op, F&& call) -> decltype(call());
  std::shared_ptr<StoreCounts> counts_ = std::make_shared<StoreCounts>();
  std::shared_ptr<const StoreCounts> constCounts_ = counts_;
};

}  // namespace commhost
