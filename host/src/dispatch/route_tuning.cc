// SPDX-License-Identifier: Apache-2.0
#include "route_tuning.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "commhost/errors.h"

namespace commhost::dispatch {
namespace {

// The end of the size class that starts at `lo`: [0, 1], [2, 3], [4, 7], ... [2^62, max].
int64_t classEnd(int64_t lo) {
  if (lo <= 1) return 1;
  int shift = 63 - __builtin_clzll(static_cast<unsigned long long>(lo));
  if (shift >= 62) return INT64_MAX;
  return (int64_t{1} << (shift + 1)) - 1;
}

std::string listText(const std::vector<TuneCandidate>& candidates) {
  std::string out;
  for (const auto& c : candidates) out += (out.empty() ? "" : ", ") + c.backend;
  return "[" + out + "]";
}

// One segment's candidates: `eligible` (backend indices) as the tuner sees them, and
// their names sorted, to check each answer against.
struct Candidates {
  std::vector<int> eligible;
  std::vector<TuneCandidate> given;
  std::vector<std::string> sortedNames;
};

Candidates candidatesOf(const TuneStep& step, std::vector<int> eligible) {
  Candidates c{std::move(eligible), {}, {}};
  for (int b : c.eligible) {
    c.given.push_back({step.backends[b], step.plugins[b]});
    c.sortedNames.push_back(step.backends[b]);
  }
  std::sort(c.sortedNames.begin(), c.sortedNames.end());
  return c;
}

// The backend index the tuner puts first among the candidates, for one size class.
int askTuner(const TuneStep& step, const TuneQuery& query, const Candidates& candidates) {
  const std::vector<TuneCandidate>& given = candidates.given;
  const std::vector<int>& eligible = candidates.eligible;
  std::vector<TuneCandidate> ordered = given;
  step.tuner.order(query, ordered);
  std::vector<std::string> b;
  for (const auto& c : ordered) b.push_back(c.backend);
  std::sort(b.begin(), b.end());
  if (b != candidates.sortedNames)
    throw PluginError("tuner '" + step.tunerName + "' answered " + listText(ordered) + " for " + opName(query.op) +
                      " at " + std::to_string(query.minBytes) + ".." + std::to_string(query.maxBytes) +
                      " bytes, which is not a reordering of the candidates it was given, " + listText(given) +
                      "; a tuner may only reorder them (fix the plugin, or remove `tuner:` from the config)");
  for (int i : eligible)
    if (step.backends[i] == ordered.front().backend) return i;
  return eligible.front();  // unreachable: the lists hold the same names
}

}  // namespace

std::vector<RouteTable::Segment> tuneSegments(const TuneStep& step, const std::vector<RouteTable::Segment>& segments,
                                              OpType op, DeviceType device, std::optional<DType> dtype,
                                              std::optional<ReduceOp::Kind> reduceOp, const EligibleFn& eligible,
                                              const NoteFn& note) {
  TuneQuery query = step.shape;
  query.op = op;
  query.device = device;
  query.hasDtype = dtype.has_value();
  query.dtype = dtype.value_or(DType::Float32);
  query.hasReduceOp = reduceOp.has_value();
  query.reduceOp = reduceOp.value_or(ReduceOp::Sum);
  std::vector<RouteTable::Segment> out;
  for (const RouteTable::Segment& s : segments) {
    const Candidates candidates = candidatesOf(step,
                                               s.route >= 0 && s.backend >= 0 ? eligible(s.route) : std::vector<int>{});
    const std::vector<int>& choices = candidates.eligible;
    if (choices.size() < 2 || std::find(choices.begin(), choices.end(), s.backend) == choices.end()) {
      out.push_back(s);  // nothing to choose between (or a cell served by an unavailable backend)
      continue;
    }
    // An op without data routes every call at 0 bytes: one question covers the segment.
    const bool sized = carriesData(op);
    for (int64_t lo = s.minBytes;;) {
      const int64_t hi = sized ? std::min(classEnd(lo), s.maxBytes) : s.maxBytes;
      query.minBytes = lo;
      query.maxBytes = hi;
      RouteTable::Segment t = s;
      t.minBytes = lo;
      t.maxBytes = hi;
      t.backend = askTuner(step, query, candidates);
      if (t.backend != s.backend) {
        t.tuned = true;
        t.note = note("tuner '" + step.tunerName + "' put " + step.backends[t.backend] + " first of " +
                      listText(candidates.given));
        if (t.shadow == t.backend) t.shadow = -1;  // a backend is never its own shadow
      }
      const RouteTable::Segment& last = out.empty() ? t : out.back();
      if (!out.empty() && last.maxBytes + 1 == lo && last.backend == t.backend && last.route == t.route &&
          last.note == t.note && last.shadow == t.shadow && last.tuned == t.tuned)
        out.back().maxBytes = hi;
      else out.push_back(t);
      if (hi >= s.maxBytes) break;
      lo = hi + 1;
    }
  }
  return out;
}

}  // namespace commhost::dispatch
