// SPDX-License-Identifier: Apache-2.0
#include "flight_recorder.h"

#include <algorithm>
#include <atomic>

#include <chrono>
#include <cstring>

#include <nlohmann/json.hpp>

namespace commhost::supervisor {

const char* opStateName(OpState s) {
  switch (s) {
    case OpState::Started: return "started";
    case OpState::Completed: return "completed";
    case OpState::Failed: return "failed";
  }
  return "?";
}

void copyName(char* dst, size_t size, const std::string& src) {
  size_t n = std::min(size - 1, src.size());
  // Cut at a character boundary: never keep the lead bytes of a split UTF-8 character.
  if (n < src.size())
    while (n > 0 && (static_cast<unsigned char>(src[n]) & 0xC0) == 0x80) --n;
  std::memcpy(dst, src.data(), n);
  dst[n] = '\0';
}

int64_t wallMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

namespace {
int64_t offsetNow() {
  using namespace std::chrono;
  return wallMicros() - duration_cast<microseconds>(steady_clock::now().time_since_epoch()).count();
}
std::atomic<int64_t> wallMinusSteadyUs{offsetNow()};
}  // namespace

void refreshWallClockOffset() { wallMinusSteadyUs.store(offsetNow(), std::memory_order_relaxed); }

int64_t wallMicros(std::chrono::steady_clock::time_point t) {
  using namespace std::chrono;
  return duration_cast<microseconds>(t.time_since_epoch()).count() + wallMinusSteadyUs.load(std::memory_order_relaxed);
}

FlightRecorder::FlightRecorder(size_t entries) : ring_(entries) {}

uint64_t FlightRecorder::add(const OpRecord& record) {
  return emplace([&](OpRecord& slot) { slot = record; });
}

void FlightRecorder::finish(uint64_t id, OpState state, int64_t endedUs, const std::string& error, double deviceMs) {
  if (id == 0) return;  // not recorded (entries 0)
  std::lock_guard<std::mutex> lock(mutex_);
  OpRecord& r = ring_[id % ring_.size()];
  if (r.id != id) return;  // overwritten by newer collectives
  r.state = state;
  r.endedUs = endedUs;
  r.deviceMs = deviceMs;
  copyName(r.error, sizeof(r.error), error);
}

std::vector<OpRecord> FlightRecorder::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<OpRecord> out;
  out.reserve(ring_.size());
  for (size_t i = 0; i < ring_.size(); ++i) {
    const OpRecord& r = ring_[(nextId_ + i) % ring_.size()];
    if (r.id != 0) out.push_back(r);
  }
  return out;
}

uint64_t FlightRecorder::collect(uint64_t from, size_t max, std::vector<OpRecord>& out, uint64_t* missed) const {
  if (ring_.empty()) return from;
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t oldest = nextId_ > ring_.size() ? nextId_ - ring_.size() : 1;
  if (from < oldest) {
    *missed += oldest - from;
    from = oldest;
  }
  const uint64_t end = std::min<uint64_t>(nextId_, from + max);
  for (uint64_t id = from; id < end; ++id) out.push_back(ring_[id % ring_.size()]);
  return end;
}

bool FlightRecorder::find(uint64_t id, OpRecord& out) const {
  if (ring_.empty() || id == 0) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  const OpRecord& r = ring_[id % ring_.size()];
  if (r.id != id) return false;
  out = r;
  return true;
}

void FlightRecorder::addSwap(SwapRecord record) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (swaps_.size() >= kSwapEntries) swaps_.pop_front();
  swaps_.push_back(std::move(record));
}

std::vector<SwapRecord> FlightRecorder::swaps() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {swaps_.begin(), swaps_.end()};
}

void FlightRecorder::addMembership(MembershipRecord record) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (memberships_.size() >= kSwapEntries) memberships_.pop_front();
  memberships_.push_back(std::move(record));
}

std::vector<MembershipRecord> FlightRecorder::memberships() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {memberships_.begin(), memberships_.end()};
}

void FlightRecorder::addShadow(ShadowEvent event) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (shadows_.size() >= kShadowEntries) shadows_.pop_front();
  shadows_.push_back(std::move(event));
}

std::vector<ShadowEvent> FlightRecorder::shadows() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {shadows_.begin(), shadows_.end()};
}

nlohmann::json shadowToJson(const ShadowEvent& e) {
  nlohmann::json j = {
      {"group", e.group},          {"rank", e.rank},         {"seq", e.seq},       {"op", e.op},
      {"bytes", e.bytes},          {"backend", e.backend},   {"shadow", e.shadow}, {"outcome", e.outcome},
      {"backend_us", e.backendUs}, {"shadow_us", e.shadowUs}};
  if (!e.detail.empty()) j["detail"] = e.detail;
  return j;
}

nlohmann::json membershipToJson(const MembershipRecord& m) {
  nlohmann::json j = {
      {"group", m.group},
      {"rank_before", m.rankBefore},
      {"rank_after", m.rankAfter},
      {"world_before", m.worldBefore},
      {"world_after", m.worldAfter},
      {"from_generation", m.fromGeneration},
      {"to_generation", m.toGeneration},
      {"removed", m.removed},
      {"outcome", m.outcome},
      {"started_us", m.startedUs},
      {"agree_us", m.agreeUs},
      {"build_us", m.buildUs},
      {"confirm_us", m.confirmUs},
      {"commit_us", m.commitUs},
      {"total_us", m.totalUs},
  };
  if (!m.error.empty()) j["error"] = m.error;
  return j;
}

nlohmann::json swapToJson(const SwapRecord& s) {
  nlohmann::json j = {
      {"group", s.group},
      {"rank", s.rank},
      {"from_generation", s.fromGeneration},
      {"to_generation", s.toGeneration},
      {"outcome", s.outcome},
      {"started_us", s.startedUs},
      {"check_us", s.checkUs},
      {"drain_us", s.drainUs},
      {"build_us", s.buildUs},
      {"commit_us", s.commitUs},
      {"total_us", s.totalUs},
      {"kept", s.kept},
      {"built", s.built},
      {"removed", s.removed},
  };
  if (!s.error.empty()) j["error"] = s.error;
  return j;
}

nlohmann::json recordToJson(const OpRecord& r) {
  nlohmann::json j = {
      {"id", r.id},
      {"group", r.group},
      {"rank", r.rank},
      {"world_size", r.worldSize},
      {"seq", r.seq},
      {"generation", r.generation},
      {"op", opName(r.op)},
      {"backend", r.backend},
      {"dtype", dtypeName(r.dtype)},
      {"bytes", r.bytes},
      {"numel", r.numel},
      {"state", opStateName(r.state)},
      {"scheduled_us", r.scheduledUs},
      {"started_us", r.startedUs},
      {"ended_us", r.endedUs},
  };
  if (r.deviceMs >= 0) j["device_ms"] = r.deviceMs;
  if (r.error[0]) j["error"] = r.error;
  return j;
}

}  // namespace commhost::supervisor
