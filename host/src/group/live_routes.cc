// SPDX-License-Identifier: Apache-2.0
// Live re-routing's statistics, their exchange format and the decision (live_routes.h).
#include "live_routes.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "commhost/errors.h"
#include "size_class.h"

namespace commhost {
namespace {

constexpr int kLiveFormat = 1;  // encodeLive's version: a rank of another build is named, not misread

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string micros(double us) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", us);
  return text;
}

std::string cellText(const LiveKey& k) {
  const int64_t lo = k.sizeClass == 1 ? 0 : k.sizeClass / 2 + 1;
  return std::string(opName(k.op)) + " " + dtypeName(k.dtype) +
         (isReduction(k.op) ? std::string(" ") + reduceOpName(k.reduceOp) : std::string()) + " " + std::to_string(lo) +
         ".." + std::to_string(k.sizeClass) + " B";
}

int indexOf(const RouteTable& table, const std::string& name) {
  const auto& names = table.backendNames();
  const auto it = std::find(names.begin(), names.end(), name);
  return it == names.end() ? -1 : static_cast<int>(it - names.begin());
}

// Whether `backend` is still some live segment's candidate in `table`.
bool stillCandidate(const RouteTable& table, const LiveKey& k, int backend) {
  const RouteTable::Segment* s = table.find(k.op, DeviceType::CPU, k.sizeClass, k.dtype, k.reduceOp);
  if (!s || s->live < 0) return false;
  const auto& c = table.liveCandidates(*s);
  return std::find(c.begin(), c.end(), backend) != c.end();
}

}  // namespace

size_t LiveRules::windowOf(const LiveKey& k) const {
  const auto it = flips.find({k.op, k.dtype, k.reduceOp, k.sizeClass});
  return window << std::min(it == flips.end() ? 0 : it->second, 4);
}

void LiveStats::add(LiveKey key, int64_t bytes, double backendUs, double candidateUs, Outcome outcome,
                    const std::string& detail) {
  if (outcome == Outcome::BackendFailed) return;
  key.sizeClass = powerOfTwoClass(bytes);
  MutexLock lock(&mutex_);
  Cell& c = cells_[key];
  if (outcome != Outcome::Agreed) {
    if (c.bad++ == 0) c.firstBad = detail;
    return;
  }
  c.times.emplace_back(backendUs, candidateUs);
  if (c.times.size() > capacity_) c.times.pop_front();
}

void LiveStats::setCapacity(size_t capacity) {
  MutexLock lock(&mutex_);
  capacity_ = capacity;
}

std::vector<LiveSummary> LiveStats::summaries(const LiveRules& rules, uint64_t base) {
  MutexLock lock(&mutex_);
  std::vector<LiveSummary> out;
  for (auto it = cells_.begin(); it != cells_.end();) it = it->first.base < base ? cells_.erase(it) : std::next(it);
  for (const auto& [key, cell] : cells_) {
    if (key.base != base) continue;
    LiveSummary s;
    s.key = key;
    s.bad = cell.bad;
    s.firstBad = cell.firstBad;
    const size_t n = std::min(cell.times.size(), rules.windowOf(key));
    std::vector<double> b, c;
    for (size_t i = cell.times.size() - n; i < cell.times.size(); ++i) {
      b.push_back(cell.times[i].first);
      c.push_back(cell.times[i].second);
    }
    s.samples = n;
    s.backendUs = median(b);
    s.candidateUs = median(c);
    out.push_back(std::move(s));
  }
  return out;
}

void LiveStats::forget(const LiveKey& cell) {
  MutexLock lock(&mutex_);
  for (auto it = cells_.begin(); it != cells_.end();) it = it->first.sameCell(cell) ? cells_.erase(it) : std::next(it);
}

std::string encodeLive(int rank, const std::vector<LiveSummary>& summaries) {
  nlohmann::json cells = nlohmann::json::array();
  for (const auto& s : summaries)
    cells.push_back({{"op", opName(s.key.op)},
                     {"dtype", dtypeName(s.key.dtype)},
                     {"reduce_op", reduceOpName(s.key.reduceOp)},
                     {"size_class", s.key.sizeClass},
                     {"backend", s.key.backend},
                     {"candidate", s.key.candidate},
                     {"base", s.key.base},
                     {"samples", s.samples},
                     {"backend_us", s.backendUs},
                     {"candidate_us", s.candidateUs},
                     {"bad", s.bad},
                     {"first_bad", s.firstBad}});
  return nlohmann::json{{"version", kLiveFormat}, {"rank", rank}, {"cells", cells}}.dump();
}

std::vector<LiveSummary> decodeLive(int rank, const std::string& text) {
  std::vector<LiveSummary> out;
  try {
    const auto j = nlohmann::json::parse(text);
    if (j.at("version").get<int>() != kLiveFormat)
      throw InvalidArgument("format version " + j.at("version").dump() + ", this rank reads version " +
                            std::to_string(kLiveFormat));
    for (const auto& c : j.at("cells")) {
      LiveSummary s;
      s.key.op = parseOpType(c.at("op").get<std::string>());
      s.key.dtype = parseDType(c.at("dtype").get<std::string>());
      s.key.reduceOp = parseReduceOp(c.at("reduce_op").get<std::string>());
      s.key.sizeClass = c.at("size_class").get<int64_t>();
      s.key.backend = c.at("backend").get<std::string>();
      s.key.candidate = c.at("candidate").get<std::string>();
      s.key.base = c.at("base").get<uint64_t>();
      s.samples = c.at("samples").get<uint64_t>();
      s.backendUs = c.at("backend_us").get<double>();
      s.candidateUs = c.at("candidate_us").get<double>();
      s.bad = c.at("bad").get<uint64_t>();
      s.firstBad = c.at("first_bad").get<std::string>();
      out.push_back(std::move(s));
    }
  } catch (const std::exception& e) {
    throw InvalidArgument("rank " + std::to_string(rank) + "'s live-routing summary is unreadable (" + e.what() +
                          "): every rank must run the same commhost build");
  }
  return out;
}

namespace {

// Candidates that disagreed or failed on some rank, and are still candidates somewhere.
void dropBad(const std::vector<std::vector<LiveSummary>>& byRank, const RouteTable& table, LiveDecision& d) {
  for (size_t r = 0; r < byRank.size(); ++r)
    for (const auto& s : byRank[r]) {
      const int b = indexOf(table, s.key.candidate);
      if (s.bad == 0 || b < 0 || std::count(d.dropped.begin(), d.dropped.end(), b) || !stillCandidate(table, s.key, b))
        continue;
      d.dropped.push_back(b);
      d.lines.push_back("dropped " + s.key.candidate +
                        " from live routing until a hot swap or membership change rebuilds the routes: on rank " +
                        std::to_string(r) + ", " + cellText(s.key) + ", it did not match " + s.key.backend + ": " +
                        s.firstBad.substr(0, 300) + "; to see every disagreement, route the op to " + s.key.backend +
                        " with shadow: " + s.key.candidate);
    }
}

}  // namespace

uint64_t nextLiveInterval(const LiveDecision& d, uint64_t every, uint64_t interval) {
  if (!d.empty() || d.learning) return every;
  return std::min(interval * 2, every * 64);
}

LiveDecision decideLive(const std::vector<std::vector<LiveSummary>>& byRank, const RouteTable& table,
                        const LiveRules& rules) {
  LiveDecision d;
  dropBad(byRank, table, d);
  std::map<LiveKey, std::vector<const LiveSummary*>> byKey;
  for (const auto& rank : byRank)
    for (const auto& s : rank) byKey[s.key].push_back(&s);
  struct Best {
    LiveKey key;
    double backendUs, candidateUs;
    uint64_t samples;
  };
  std::map<std::tuple<OpType, DType, ReduceOp::Kind, int64_t>, Best> best;  // per cell: the fastest qualifying
  for (const auto& [key, all] : byKey) {
    const int cand = indexOf(table, key.candidate);
    if (cand < 0 || std::count(d.dropped.begin(), d.dropped.end(), cand)) continue;
    const RouteTable::Segment* seg = table.find(key.op, DeviceType::CPU, key.sizeClass, key.dtype, key.reduceOp);
    if (!seg || seg->backend < 0 || table.backendNames()[seg->backend] != key.backend ||
        !stillCandidate(table, key, cand))
      continue;                         // measured under a table no longer in use
    if (all.size() != byRank.size()) {  // a rank has not sampled it yet
      d.learning = true;
      continue;
    }
    // Each side's time on the rank that waited least: a collective's clock on a rank that
    // arrived early also runs while it waits for the last one, so with ranks out of phase
    // the slowest rank's figure measures their skew, the least one the op.
    const size_t need = rules.windowOf(key);
    double b = std::numeric_limits<double>::infinity(), c = b;
    bool enough = true;
    for (const LiveSummary* s : all) {
      enough = enough && s->samples >= need && s->bad == 0;
      b = std::min(b, s->backendUs);
      c = std::min(c, s->candidateUs);
    }
    if (!enough) {
      d.learning = true;
      continue;
    }
    if (!(c < (1 - rules.margin) * b)) {  // lost over a full window: no longer sampled in this class
      d.switches.push_back({key.op, key.dtype, key.reduceOp, key.sizeClass == 1 ? 0 : key.sizeClass / 2 + 1,
                            key.sizeClass, cand, "", true, seg->backend});
      d.lines.push_back(cellText(key) + ": stays on " + key.backend + ", " + key.candidate + " no longer sampled (" +
                        micros(c) + " us against " + micros(b) + " us, median of " + std::to_string(need) +
                        " sampled calls, on the rank that waited least)");
      continue;
    }
    const auto cell = std::make_tuple(key.op, key.dtype, key.reduceOp, key.sizeClass);
    const auto it = best.find(cell);
    if (it == best.end() || c < it->second.candidateUs) best[cell] = Best{key, b, c, need};
  }
  for (const auto& [cell, w] : best) {
    const std::string why = w.key.candidate + " took " + micros(w.candidateUs) + " us against " + w.key.backend +
                            "'s " + micros(w.backendUs) + " us (median of " + std::to_string(w.samples) +
                            " sampled calls, on the rank that waited least; every result agreeing)";
    const int64_t lo = w.key.sizeClass == 1 ? 0 : w.key.sizeClass / 2 + 1;
    d.switches.push_back({w.key.op, w.key.dtype, w.key.reduceOp, lo, w.key.sizeClass, indexOf(table, w.key.candidate),
                          "tune: live: " + why, false, indexOf(table, w.key.backend)});
    d.switched.push_back(w.key);
    d.lines.push_back(cellText(w.key) + ": " + w.key.backend + " -> " + w.key.candidate + ": " + why);
  }
  return d;
}

}  // namespace commhost
