// SPDX-License-Identifier: Apache-2.0
// monitored_barrier over the store: rank 0 waits for each rank's arrival key and can
// therefore name the ranks that never came; then it releases everyone.
#include <chrono>

#include "call.h"

namespace commhost {

void ProcessGroup::Impl::monitoredBarrier(const MonitoredBarrierOptions& opts) {
  const uint64_t seq = seq_.fetch_add(1, std::memory_order_relaxed) + 1;
  const auto timeout = opts.timeout.count() > 0 ? opts.timeout : setup_.config->timeout();
  const ErrorContext where{name_, rank_, "monitored_barrier", seq};
  const std::string round = "monitored_barrier/" + std::to_string(seq) + "/";
  if (rank_ != 0) {
    store_->set(round + std::to_string(rank_), toBytes("1"));
    try {
      store_->wait({round + "done"}, timeout);
    } catch (const TimeoutError&) {
      raise(ErrorCode::Timeout, where, "rank 0 did not release the barrier within " + formatDuration(timeout),
            "rank 0 reports which ranks did not arrive; check its log");
    }
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string missing;
  int missingCount = 0;
  for (int r = 1; r < worldSize_; ++r) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                            std::chrono::steady_clock::now());
    const std::string key = round + std::to_string(r);
    bool arrived = false;
    try {
      store_->wait({key}, std::max(left, std::chrono::milliseconds(1)));
      arrived = true;
    } catch (const TimeoutError&) {
    }
    if (!arrived) {
      missing += (missing.empty() ? "" : ", ") + std::to_string(globalRanks_[r]);
      ++missingCount;
      if (!opts.waitAllRanks) break;
    }
  }
  if (!missing.empty())
    raise(ErrorCode::Timeout, where,
          std::string(missingCount > 1 ? "ranks " : "rank ") + missing + " did not reach the barrier within " +
              formatDuration(timeout) +
              (opts.waitAllRanks ? "" : " (the first one missing; pass waitAllRanks for all)"),
          "check those ranks' logs: they may have failed, hung, or skipped this barrier");
  store_->set(round + "done", toBytes("1"));
}

}  // namespace commhost
