// SPDX-License-Identifier: Apache-2.0
#include "op_stats.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace commhost::supervisor {

const char* sizeClassName(size_t sizeClass) {
  static const char* const kNames[kNumSizeClasses] = {"le1KiB", "le64KiB", "le1MiB", "le16MiB", "gt16MiB"};
  return sizeClass < kNumSizeClasses ? kNames[sizeClass] : "?";
}

OpCell* OpStats::cell(const std::string& group, OpType op, const std::string& backend, size_t sizeClass) {
  OpKey key{group, op, backend, sizeClass};
  auto it = cells_.find(key);
  if (it != cells_.end()) return &it->second;
  if (cells_.size() >= kMaxCells) return nullptr;
  return &cells_.emplace(std::move(key), OpCell{}).first->second;
}

void OpStats::add(const OpRecord& r) {
  OpCell* c = cell(r.group, r.op, r.backend, sizeClassOf(r.bytes));
  if (!c) {
    ++overflow_;
    return;
  }
  if (r.state == OpState::Failed) {
    ++c->failed;
    return;
  }
  ++c->completed;
  c->bytes += static_cast<uint64_t>(std::max<int64_t>(r.bytes, 0));
  addLatencyTo(*c, r);
}

void OpStats::addLatency(const OpRecord& r) {
  if (!r.timed) return;
  if (OpCell* c = cell(r.group, r.op, r.backend, sizeClassOf(r.bytes))) addLatencyTo(*c, r);
}

void OpStats::addCompleted(const std::string& group, OpType op, const std::string& backend, size_t sizeClass,
                           uint64_t ops, uint64_t bytes) {
  OpCell* c = cell(group, op, backend, sizeClass);
  if (!c) {
    overflow_ += ops;
    return;
  }
  c->completed += ops;
  c->bytes += bytes;
}

void OpStats::addLatencyTo(OpCell& c, const OpRecord& r) {
  if (!r.timed) return;
  ++c.timed;
  // Issue to completion as the recorder saw it (scheduled: before the backend was called;
  // for a small op outside the sample that ran on after its call, the call's return).
  const int64_t from = r.scheduledUs ? r.scheduledUs : r.startedUs;
  const int64_t us = std::max<int64_t>(r.endedUs - from, 0);
  c.latencySumUs += static_cast<uint64_t>(us);
  size_t b = 0;
  while (b < kLatencyBucketsUs.size() && us > kLatencyBucketsUs[b]) ++b;
  ++c.buckets[b];
}

nlohmann::json OpStats::toJson() const {
  nlohmann::json cells = nlohmann::json::array();
  for (const auto& [k, c] : cells_)
    cells.push_back({{"group", k.group},
                     {"op", opName(k.op)},
                     {"backend", k.backend},
                     {"size_class", sizeClassName(k.sizeClass)},
                     {"completed", c.completed},
                     {"failed", c.failed},
                     {"bytes", c.bytes},
                     {"timed", c.timed},
                     {"latency_sum_us", c.latencySumUs},
                     {"buckets", c.buckets}});
  return {{"cells", std::move(cells)},
          {"missed", missed_},
          {"overflow", overflow_},
          {"latency_buckets_us", kLatencyBucketsUs}};
}

void OpStatsCollector::poll(const FlightRecorder& recorder) {
  // Works seen running before: those that ended count now; those overwritten are missed.
  std::vector<uint64_t> still;
  OpRecord r;
  for (uint64_t id : pending_) {
    if (!recorder.find(id, r)) {
      stats_.addMissed(1);
    } else if (r.state == OpState::Started) {
      still.push_back(id);
    } else {
      stats_.add(r);
    }
  }
  pending_.swap(still);
  std::vector<OpRecord> batch;
  batch.reserve(kBatch);
  for (;;) {
    batch.clear();
    uint64_t missed = 0;
    const uint64_t next = recorder.collect(next_, kBatch, batch, &missed);
    stats_.addMissed(missed);
    for (const OpRecord& rec : batch) {
      if (rec.id == 0) continue;
      if (rec.state != OpState::Started) {
        stats_.add(rec);
      } else if (pending_.size() < kMaxPending) {
        pending_.push_back(rec.id);
      } else {
        stats_.addMissed(1);
      }
    }
    next_ = next;
    if (batch.size() < kBatch) break;
  }
  pollLanes(recorder);
}

// The lanes hold only ops that completed in their call: nothing to come back to. Their
// counts say how many, exactly; a bounded number of the newest records, their latency.
void OpStatsCollector::pollLanes(const FlightRecorder& recorder) {
  std::vector<ThreadLanes::CountNow> counts;
  uint64_t uncounted = 0;
  recorder.laneCounts(counts, &uncounted);
  for (const auto& c : counts) {
    if (laneCounted_.size() <= c.lane) laneCounted_.resize(c.lane + 1);
    auto& seen = laneCounted_[c.lane];
    if (seen.size() <= c.cell) seen.resize(c.cell + 1);
    // Both compared: a poll between the writer's two stores sees one moved, and the other
    // catches up at the next poll.
    if (c.ops == seen[c.cell].first && c.bytes == seen[c.cell].second) continue;
    stats_.addCompleted(c.names->group, c.op, c.names->backend, c.sizeClass, c.ops - seen[c.cell].first,
                        c.bytes - seen[c.cell].second);
    seen[c.cell] = {c.ops, c.bytes};
  }
  std::vector<OpRecord> batch;
  uint64_t skipped = 0;  // counted all the same, but for the uncounted ones below
  recorder.collectLanes(laneNext_, kLaneRecords, batch, &skipped, /*informative=*/true);
  for (const OpRecord& rec : batch) {
    if (rec.counted) {
      stats_.addLatency(rec);
    } else {  // its key found no count cell: counted from the record, as the ring's
      stats_.add(rec);
      ++uncountedRead_;
    }
  }
  // The ops no cell counted and no record read gave labels to (read after the counts, the
  // records may be ahead of them for a poll).
  const uint64_t unlabelled = uncounted > uncountedRead_ ? uncounted - uncountedRead_ : 0;
  if (unlabelled > unlabelled_) {
    stats_.addMissed(unlabelled - unlabelled_);
    unlabelled_ = unlabelled;
  }
}

}  // namespace commhost::supervisor
