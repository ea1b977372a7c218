// SPDX-License-Identifier: Apache-2.0
// RouteTable's live edits (tune: live): a size range of a cell moved to a candidate, and a
// candidate dropped everywhere. Each returns a new table; the group swaps to it at a sync
// point (group/live_routes.h), so tables stay immutable once a call can see them.
#include <algorithm>

#include "commhost/dispatcher.h"

namespace commhost {
namespace {

// Whether two neighbours resolve alike (their byte ranges aside).
bool alike(const RouteTable::Segment& a, const RouteTable::Segment& b) {
  RouteTable::Segment x = a;
  x.minBytes = b.minBytes;
  x.maxBytes = b.maxBytes;
  return x == b;
}

}  // namespace

int RouteTable::reroutedList(int list, const Reroute& c) {
  const auto noteIndex = [&](const std::string& text) {
    const auto it = std::find(notes_.begin(), notes_.end(), text);
    if (it != notes_.end()) return static_cast<int>(it - notes_.begin());
    notes_.push_back(text);
    return static_cast<int>(notes_.size()) - 1;
  };
  const auto liveIndex = [&](const std::vector<int>& candidates) {
    const auto it = std::find(liveLists_.begin() + 1, liveLists_.end(), candidates);
    if (it != liveLists_.end()) return static_cast<int>(it - liveLists_.begin());
    liveLists_.push_back(candidates);
    return static_cast<int>(liveLists_.size()) - 1;
  };
  std::vector<Segment> out;
  for (const Segment& s : lists_[static_cast<size_t>(list)]) {
    const bool overlaps = s.maxBytes >= c.minBytes && s.minBytes <= c.maxBytes;
    const std::vector<int>* candidates = s.live >= 0 ? &liveLists_[static_cast<size_t>(s.live)] : nullptr;
    const bool measured = c.from < 0 || s.backend == c.from;  // a part routed elsewhere was not compared
    if (!overlaps || !measured || !candidates ||
        std::find(candidates->begin(), candidates->end(), c.backend) == candidates->end()) {
      out.push_back(s);
      continue;
    }
    if (s.minBytes < c.minBytes) {
      out.push_back(s);
      out.back().maxBytes = c.minBytes - 1;
    }
    Segment moved = s;
    moved.minBytes = std::max(s.minBytes, c.minBytes);
    moved.maxBytes = std::min(s.maxBytes, c.maxBytes);
    std::vector<int> next;
    if (!c.settle) next.push_back(s.backend);  // the backend it leaves stays a candidate: it may win back
    for (int b : *candidates)
      if (b != c.backend) next.push_back(b);
    if (!c.settle) {
      moved.backend = c.backend;
      moved.rerouted = true;
      moved.tuned = false;
      moved.note = noteIndex(c.note);
    }
    moved.live = next.empty() ? -1 : liveIndex(next);
    moved.shadow = next.empty() ? -1 : next.front();
    out.push_back(moved);
    if (s.maxBytes > c.maxBytes) {
      out.push_back(s);
      out.back().minBytes = c.maxBytes + 1;
    }
  }
  std::vector<Segment> merged;
  for (const Segment& s : out) {
    if (!merged.empty() && alike(merged.back(), s) && merged.back().maxBytes + 1 == s.minBytes) {
      merged.back().maxBytes = s.maxBytes;
    } else {
      merged.push_back(s);
    }
  }
  lists_.push_back(std::move(merged));
  return static_cast<int>(lists_.size()) - 1;
}

RouteTable RouteTable::rerouted(const std::vector<Reroute>& changes) const {
  RouteTable t = *this;
  for (const Reroute& c : changes) {
    std::vector<std::pair<int, int>> edited;  // old list -> its edit: slots sharing a list share the edit
    for (int k = 0; k < ReduceOp::kNumKinds; ++k) {
      if (isReduction(c.op) && k != static_cast<int>(c.reduceOp)) continue;
      int& cell = t.cells_[cellOf(c.op, DeviceType::CPU, c.dtype, static_cast<ReduceOp::Kind>(k))];
      const auto it = std::find_if(edited.begin(), edited.end(), [&](const auto& e) { return e.first == cell; });
      if (it != edited.end()) {
        cell = it->second;
        continue;
      }
      const int list = t.reroutedList(cell, c);
      edited.emplace_back(cell, list);
      cell = list;
    }
  }
  t.compact();
  t.markUsed();
  return t;
}

RouteTable RouteTable::withoutCandidate(int backend) const {
  RouteTable t = *this;
  // A range live routing had moved to it goes back to the backend it left (its first
  // candidate): what disagreed once serves nothing live routing chose.
  for (auto& list : t.lists_)
    for (Segment& s : list) {
      if (!s.rerouted || s.backend != backend || s.live < 0) continue;
      std::vector<int> rest = t.liveLists_[static_cast<size_t>(s.live)];
      s.backend = rest.front();
      rest.erase(rest.begin());
      t.liveLists_.push_back(rest);
      s.live = static_cast<int>(t.liveLists_.size()) - 1;
      s.rerouted = false;
      s.note = -1;
    }
  for (auto& candidates : t.liveLists_)
    candidates.erase(std::remove(candidates.begin(), candidates.end(), backend), candidates.end());
  for (auto& list : t.lists_)
    for (Segment& s : list) {
      if (s.live < 0) continue;
      const auto& candidates = t.liveLists_[static_cast<size_t>(s.live)];
      if (candidates.empty()) s.live = -1;
      s.shadow = candidates.empty() ? -1 : candidates.front();
    }
  t.compact();
  t.markUsed();
  return t;
}

// An edit leaves the lists it replaced behind: keep only what a cell reaches, so a long
// job's tables stay the size of its routes however often live routing moves them.
void RouteTable::compact() {
  std::vector<int> listMap(lists_.size(), -1);
  std::vector<std::vector<Segment>> lists{{}};
  listMap[0] = 0;
  for (int& cell : cells_) {
    int& to = listMap[static_cast<size_t>(cell)];
    if (to < 0) {
      to = static_cast<int>(lists.size());
      lists.push_back(std::move(lists_[static_cast<size_t>(cell)]));
    }
    cell = to;
  }
  std::vector<std::vector<int>> live{{}};
  for (auto& list : lists)
    for (Segment& s : list) {
      if (s.live < 0) continue;
      const std::vector<int>& candidates = liveLists_[static_cast<size_t>(s.live)];
      const auto it = std::find(live.begin() + 1, live.end(), candidates);
      s.live = static_cast<int>(it - live.begin());
      if (it == live.end()) live.push_back(candidates);
    }
  lists_ = std::move(lists);
  liveLists_ = std::move(live);
}

// From the lists some cell uses.
void RouteTable::markUsed() {
  used_.assign(names_.size(), false);
  serves_.assign(names_.size(), false);
  std::vector<bool> seen(lists_.size(), false);
  for (int cell : cells_) {
    if (seen[static_cast<size_t>(cell)]) continue;
    seen[static_cast<size_t>(cell)] = true;
    for (const Segment& s : lists_[static_cast<size_t>(cell)]) {
      if (s.backend >= 0) used_[s.backend] = serves_[s.backend] = true;
      if (s.shadow >= 0) used_[s.shadow] = true;
      if (s.live >= 0)
        for (int c : liveLists_[static_cast<size_t>(s.live)]) used_[c] = true;
    }
  }
}

}  // namespace commhost
