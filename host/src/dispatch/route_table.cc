// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include "commhost/dispatcher.h"
#include "commhost/errors.h"
#include "commhost/registry.h"
#include "route_tuning.h"

namespace commhost {
namespace {

// Key weights: a route naming a heavier key is more specific (see dispatcher.h).
constexpr int kOpKey = 8, kDTypeKey = 4, kReduceOpKey = 2, kDeviceKey = 1;

struct Candidate {
  int route;
  int backend;
  int specificity;
  int64_t minBytes, maxBytes;
  std::string skipped;  // why earlier listed backends could not serve the cell
  unsigned __int128 width() const { return static_cast<unsigned __int128>(maxBytes - minBytes) + 1; }
  bool covers(int64_t lo, int64_t hi) const { return minBytes <= lo && maxBytes >= hi; }
};

std::string range(int64_t lo, int64_t hi) {
  return hi == INT64_MAX ? std::to_string(lo) + "+ bytes" : std::to_string(lo) + ".." + std::to_string(hi) + " bytes";
}

bool servedByHost(OpType op) { return op == OpType::MonitoredBarrier; }

int specificity(const RouteSpec& r) {
  return (r.op ? kOpKey : 0) + (r.dtype ? kDTypeKey : 0) + (r.reduceOp ? kReduceOpKey : 0) +
         (r.device ? kDeviceKey : 0);
}

// "allreduce bf16 max on cpu", "cuda tensors": the keys given, in the order routes are written.
std::string cellText(std::optional<OpType> op, std::optional<DeviceType> dev, std::optional<DType> dtype,
                     std::optional<ReduceOp::Kind> rop) {
  std::string out = op ? opName(*op) : "";
  if (dtype) out += std::string(out.empty() ? "" : " ") + dtypeName(*dtype);
  if (rop) out += std::string(out.empty() ? "" : " ") + reduceOpName(*rop);
  if (!op && (dtype || rop)) out += " ops";
  if (dev) return out.empty() ? std::string(deviceTypeName(*dev)) + " tensors" : out + " on " + deviceTypeName(*dev);
  return out.empty() ? "every op" : out;
}

// Why backend `name` cannot serve the keys given ("" when it can).
std::string lacks(const Capabilities& caps, const std::string& name, std::optional<OpType> op,
                  std::optional<DeviceType> dev, std::optional<DType> dtype, std::optional<ReduceOp::Kind> rop) {
  const std::string who = "'" + name + "'";
  if (op && !caps.ops.has(*op)) return who + " does not implement " + opName(*op);
  if (dev && !caps.devices.has(*dev)) return who + " does not support " + deviceTypeName(*dev) + " tensors";
  if (dtype && !caps.dtypes.has(*dtype)) return who + " lacks dtype " + dtypeName(*dtype);
  if (rop && !caps.reduceOps.has(*rop)) return who + " lacks reduce op " + reduceOpName(*rop);
  return "";
}

std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

// What a backend lacks for one cell, named without the cell's values so that the notes
// of many cells (each dtype, each reduce op) read alike and describe() merges them.
// Unavailable: its manifest has the cell, but its plugin cannot run here.
enum class Lack { None, Op, Device, DType, ReduceOp, Unavailable };

// A listed backend passed over for a cell, and why.
struct Skip {
  std::string name;
  Lack lack;
  std::string why;  // Unavailable: the plugin's reason
};

Lack lackOf(const Capabilities& caps, OpType op, DeviceType dev, std::optional<DType> dtype,
            std::optional<ReduceOp::Kind> rop) {
  if (!caps.ops.has(op)) return Lack::Op;
  if (!caps.devices.has(dev)) return Lack::Device;
  if (dtype && !caps.dtypes.has(*dtype)) return Lack::DType;
  if (rop && !caps.reduceOps.has(*rop)) return Lack::ReduceOp;
  return Lack::None;
}

// "'mine', 'shm' lack the dtype; 'x' lacks the op; 'y' is unavailable here (no CUDA
// device)", in the order the backends are listed.
std::string lackText(const std::vector<Skip>& lacks) {
  std::vector<std::pair<Lack, std::vector<std::string>>> byKind;
  std::vector<std::string> parts;
  for (const auto& skip : lacks) {
    if (skip.lack == Lack::Unavailable) continue;
    auto it = std::find_if(byKind.begin(), byKind.end(), [&](const auto& e) { return e.first == skip.lack; });
    if (it == byKind.end()) byKind.push_back({skip.lack, {"'" + skip.name + "'"}});
    else it->second.push_back("'" + skip.name + "'");
  }
  for (const auto& [lack, names] : byKind) {
    const char* what = lack == Lack::Op       ? "the op"
                       : lack == Lack::Device ? "the device"
                       : lack == Lack::DType  ? "the dtype"
                                              : "the reduce op";
    parts.push_back(join(names, ", ") + (names.size() > 1 ? " lack " : " lacks ") + what);
  }
  for (const auto& skip : lacks)
    if (skip.lack == Lack::Unavailable) parts.push_back("'" + skip.name + "' is unavailable here (" + skip.why + ")");
  return join(parts, "; ");
}

}  // namespace

// The routes' problems as build() reports them: one per line, sorted, each once.
std::string RouteProblem::text() const { return where.empty() ? message : where + ": " + message; }

namespace {
[[noreturn]] void throwProblems(std::vector<RouteProblem> problems) {
  std::vector<std::string> lines;
  for (const auto& p : problems) lines.push_back(p.text());
  std::sort(lines.begin(), lines.end());
  lines.erase(std::unique(lines.begin(), lines.end()), lines.end());
  std::string message = "routes:";
  for (const auto& line : lines) message += "\n  " + line;
  throw ConfigError(message);
}
}  // namespace

RouteTable RouteTable::build(const std::vector<RouteSpec>& routes,
                             const std::vector<std::pair<std::string, Capabilities>>& backends,
                             const std::vector<std::string>& unavailable) {
  std::vector<RouteProblem> problems;
  RouteTable table = collect(routes, backends, unavailable, problems);
  if (!problems.empty()) throwProblems(std::move(problems));
  return table;
}

namespace {

using Backends = std::vector<std::pair<std::string, Capabilities>>;

// What the steps of one build share: its inputs, each route's backends by index, which
// routes' shadows serve some cell, and the problems found so far.
struct BuildState {
  const std::vector<RouteSpec>& routes;
  const Backends& backends;
  const std::vector<std::string>& unavailable;
  std::vector<RouteProblem>& problems;
  std::vector<std::vector<int>> listed;  // each route's backends by index (-1: unknown)
  std::vector<bool> shadowServes;        // per route: its shadow runs some cell
  const dispatch::TuneStep* tune;        // null: the routes' own order

  int backendIndex(const std::string& name) const {
    for (size_t i = 0; i < backends.size(); ++i)
      if (backends[i].first == name) return static_cast<int>(i);
    return -1;
  }
  std::string whyUnavailable(int b) const {
    return static_cast<size_t>(b) < unavailable.size() ? unavailable[static_cast<size_t>(b)] : std::string();
  }
};

// Each route's backends by index, and what its explicit keys ask of them; returns the
// devices the routes serve.
EnumSet<DeviceType> indexRoutes(BuildState& b) {
  EnumSet<DeviceType> devices;
  b.listed.assign(b.routes.size(), {});
  b.shadowServes.assign(b.routes.size(), false);
  for (size_t r = 0; r < b.routes.size(); ++r) {
    const RouteSpec& route = b.routes[r];
    bool known = true;
    for (const auto& name : route.backends()) {
      const int i = b.backendIndex(name);
      if (i < 0) {
        b.problems.push_back({route.where, "route to unknown backend '" + name + "'"});
        known = false;
      }
      b.listed[r].push_back(i);
    }
    if (!known) continue;
    if (route.op && route.reduceOp && !isReduction(*route.op))
      b.problems.push_back({route.where,
                            "reduce_op applies only to reducing ops (allreduce, allreduce_coalesced, reduce, "
                            "reduce_scatter, reduce_scatter_tensor), not " +
                                std::string(opName(*route.op)) + "; remove reduce_op from this route"});
    if (route.op && route.dtype && !carriesData(*route.op))
      b.problems.push_back(
          {route.where, std::string(opName(*route.op)) +
                            " carries no data, so dtype cannot select it; remove dtype from this route"});
    std::vector<std::string> reasons;
    for (int i : b.listed[r]) {
      const std::string why = lacks(b.backends[i].second, b.backends[i].first, route.op, route.device, route.dtype,
                                    route.reduceOp);
      if (why.empty()) {
        reasons.clear();
        break;
      }
      reasons.push_back(why);
    }
    if (!reasons.empty()) {
      const std::string what = cellText(route.op, route.device, route.dtype, route.reduceOp);
      b.problems.push_back({route.where, "route sends " + what + " to " +
                                             (b.listed[r].size() == 1 ? "backend '" + route.backend + "'"
                                                                      : "[" + join(route.backends(), ", ") + "]") +
                                             ", which cannot serve it (" + join(reasons, "; ") + "); route " + what +
                                             " to a backend that has it, or add one to this route's list"});
    }
    for (int d = 0; d < kNumDeviceTypes; ++d) {
      const auto dev = static_cast<DeviceType>(d);
      bool any = false;
      for (int i : b.listed[r]) any = any || b.backends[i].second.devices.has(dev);
      if (route.device ? *route.device == dev : any) devices.add(dev);
    }
  }
  return devices;
}

// The routes that serve (op, device) for some dtype and reduce op; `points` gets the
// byte counts where one starts or ends.
std::vector<int> matchingRoutes(const BuildState& b, OpType op, DeviceType dev, std::set<int64_t>& points) {
  std::vector<int> matching;
  for (size_t r = 0; r < b.routes.size(); ++r) {
    const RouteSpec& route = b.routes[r];
    bool hasOp = false, hasDev = false;
    for (int i : b.listed[r]) {
      hasOp = hasOp || b.backends[i].second.ops.has(op);
      hasDev = hasDev || b.backends[i].second.devices.has(dev);
    }
    if (!(route.op ? *route.op == op : hasOp) || !(route.device ? *route.device == dev : hasDev)) continue;
    if ((route.dtype && !carriesData(op)) || (route.reduceOp && !isReduction(op))) continue;
    matching.push_back(static_cast<int>(r));
    points.insert(route.minBytes);
    if (route.maxBytes != INT64_MAX) points.insert(route.maxBytes + 1);
  }
  return matching;
}

// The last byte count of the range that starts at starts[i].
int64_t rangeEnd(const std::vector<int64_t>& starts, size_t i) {
  return i + 1 < starts.size() ? starts[i + 1] - 1 : INT64_MAX;
}

// A byte range of (op, device) that no matching route covers is a config error; one left
// open by dtype or reduce op is not. False when no route matches at all.
bool checkCoverage(BuildState& b, OpType op, DeviceType dev, const std::vector<int>& matching,
                   const std::vector<int64_t>& starts) {
  const std::string what = std::string(opName(op)) + " on " + deviceTypeName(dev);
  if (matching.empty()) {
    b.problems.push_back({"",
                          "no route serves " + what + ": add a route for it (e.g. { device: " + deviceTypeName(dev) +
                              ", op: " + opName(op) + ", backend: NAME }) to a backend that implements it",
                          true});
    return false;
  }
  for (size_t i = 0; i < starts.size(); ++i) {
    bool covered = false;
    for (int r : matching)
      covered = covered || (b.routes[r].minBytes <= starts[i] && b.routes[r].maxBytes >= rangeEnd(starts, i));
    if (!covered)
      b.problems.push_back({"",
                            "no route serves " + what + " for messages of " + range(starts[i], rangeEnd(starts, i)) +
                                ": widen a route's min_bytes/max_bytes or add one",
                            true});
  }
  return true;
}

// One cell's candidates: each matching route with the backend it gives the cell, and in
// `unable` the routes whose keys match but whose backends all lack the cell. A backend
// that cannot run here is passed over for the next listed one that serves the cell; when
// none does, the cell goes to the first of them, so a call fails naming why rather than
// finding no route.
void cellCandidates(const BuildState& b, const std::vector<int>& matching, OpType op, DeviceType dev,
                    std::optional<DType> dtype, std::optional<ReduceOp::Kind> rop, std::vector<Candidate>& candidates,
                    std::vector<Candidate>& unable) {
  for (int r : matching) {
    const RouteSpec& route = b.routes[r];
    if ((route.dtype && route.dtype != dtype) || (route.reduceOp && route.reduceOp != rop)) continue;
    std::vector<Skip> skipped;
    int chosen = -1, firstUnavailable = -1;
    for (int i : b.listed[r]) {
      const Lack lack = lackOf(b.backends[i].second, op, dev, dtype, rop);
      const std::string why = b.whyUnavailable(i);
      if (lack == Lack::None && why.empty()) {
        chosen = i;
        break;
      }
      if (lack == Lack::None && firstUnavailable < 0) firstUnavailable = i;
      skipped.push_back({b.backends[i].first, lack == Lack::None ? Lack::Unavailable : lack, why});
    }
    if (chosen < 0 && firstUnavailable >= 0) {
      chosen = firstUnavailable;
      skipped.erase(std::find_if(skipped.begin(), skipped.end(),
                                 [&](const Skip& s) { return s.name == b.backends[chosen].first; }));
    }
    Candidate c{r, chosen, specificity(route), route.minBytes, route.maxBytes, lackText(skipped)};
    (chosen >= 0 ? candidates : unable).push_back(std::move(c));
  }
}

// The most specific candidate covering [lo, hi] (the narrowest among equals); two equally
// specific and wide ones to different backends are a problem.
const Candidate* bestCandidate(BuildState& b, const std::vector<Candidate>& candidates, int64_t lo, int64_t hi,
                               const std::string& what) {
  const Candidate* best = nullptr;
  for (const auto& c : candidates) {
    if (!c.covers(lo, hi)) continue;
    if (!best || c.specificity > best->specificity ||
        (c.specificity == best->specificity && c.width() < best->width())) {
      best = &c;
    } else if (c.specificity == best->specificity && c.width() == best->width() && c.backend != best->backend) {
      b.problems.push_back(
          {b.routes[c.route].where, "route to '" + b.backends[c.backend].first + "' and " +
                                        b.routes[best->route].where + ": route to '" + b.backends[best->backend].first +
                                        "' are equally specific for " + what + " at " + range(lo, hi) +
                                        "; name the op, dtype or reduce_op, or narrow the byte range of one of them"});
    }
  }
  return best;
}

// The backends of `route` (by index, in its order) that serve the cell and can run here.
std::vector<int> eligibleBackends(const BuildState& b, int route, OpType op, DeviceType dev, std::optional<DType> dtype,
                                  std::optional<ReduceOp::Kind> rop) {
  std::vector<int> out;
  for (int i : b.listed[static_cast<size_t>(route)])
    if (i >= 0 && lackOf(b.backends[i].second, op, dev, dtype, rop) == Lack::None && b.whyUnavailable(i).empty())
      out.push_back(i);
  return out;
}

// One cell's segments, adjacent ranges that resolve alike merged; `note` interns a note.
std::vector<RouteTable::Segment> cellSegments(BuildState& b, const std::vector<Candidate>& candidates,
                                              const std::vector<Candidate>& unable, const std::vector<int64_t>& starts,
                                              OpType op, DeviceType dev, std::optional<DType> dtype,
                                              std::optional<ReduceOp::Kind> rop,
                                              const std::function<int(const std::string&)>& note) {
  const std::string what = std::string(opName(op)) + " on " + deviceTypeName(dev);
  const std::string cell = cellText(op, dev, dtype, rop);
  std::vector<RouteTable::Segment> segments;
  for (size_t i = 0; i < starts.size(); ++i) {
    const int64_t lo = starts[i], hi = rangeEnd(starts, i);
    const Candidate* best = bestCandidate(b, candidates, lo, hi, what);
    // More specific routes passed over because none of their backends has the cell.
    std::vector<std::string> passed;
    for (const auto& u : unable)
      if (u.covers(lo, hi) && (!best || u.specificity > best->specificity ||
                               (u.specificity == best->specificity && u.width() < best->width())))
        passed.push_back("route at " + b.routes[u.route].where + ": " + u.skipped);
    if (best && !best->skipped.empty()) passed.push_back(best->skipped);
    RouteTable::Segment s{lo, hi, best ? best->backend : -1, best ? best->route : -1, -1};
    if (best && !b.routes[best->route].shadow.empty() && RouteTable::shadowable(op)) {
      const int sh = b.backendIndex(b.routes[best->route].shadow);
      if (sh >= 0 && sh != best->backend && lackOf(b.backends[sh].second, op, dev, dtype, rop) == Lack::None) {
        s.shadow = sh;
        b.shadowServes[best->route] = true;
      }
    }
    s.note = best ? note(join(passed, "; "))
                  : note("no route serves " + cell + " for " + range(lo, hi) +
                         (passed.empty() ? std::string() : " (" + join(passed, "; ") + ")"));
    if (!segments.empty() && segments.back().backend == s.backend && segments.back().route == s.route &&
        segments.back().note == s.note && segments.back().shadow == s.shadow) {
      segments.back().maxBytes = hi;
    } else {
      segments.push_back(s);
    }
  }
  return segments;
}

// The tuner's choice per size class where the cell's route lists two or more backends
// that serve it here (route_tuning.h).
std::vector<RouteTable::Segment> tuneCell(const BuildState& b, const std::vector<RouteTable::Segment>& segments,
                                          OpType op, DeviceType dev, std::optional<DType> dtype,
                                          std::optional<ReduceOp::Kind> rop, const dispatch::NoteFn& note) {
  const auto eligible = [&](int route) { return eligibleBackends(b, route, op, dev, dtype, rop); };
  return dispatch::tuneSegments(*b.tune, segments, op, dev, dtype, rop, eligible, note);
}

// tune: live: each segment of a live route (a shadowable op, on the CPU, where shadows
// run) gets the route's other eligible backends as candidates; `intern` numbers a list.
void liveCell(const BuildState& b, std::vector<RouteTable::Segment>& segments, OpType op, DeviceType dev,
              std::optional<DType> dtype, std::optional<ReduceOp::Kind> rop,
              const std::function<int(const std::vector<int>&)>& intern) {
  if (!RouteTable::shadowable(op) || dev != DeviceType::CPU) return;
  for (auto& s : segments) {
    if (s.route < 0 || s.backend < 0 || !b.routes[static_cast<size_t>(s.route)].live) continue;
    std::vector<int> candidates;
    for (int i : eligibleBackends(b, s.route, op, dev, dtype, rop))
      if (i != s.backend) candidates.push_back(i);
    if (candidates.empty()) continue;
    s.live = intern(candidates);
    s.shadow = candidates.front();
  }
}

// A shadow that serves none of its route's cells would never run.
void checkShadowsServe(BuildState& b) {
  for (size_t r = 0; r < b.routes.size(); ++r)
    if (!b.routes[r].shadow.empty() && !b.shadowServes[r])
      b.problems.push_back(
          {b.routes[r].where, "shadow '" + b.routes[r].shadow +
                                  "' serves none of this route's allreduce, broadcast or allgather_into_tensor calls "
                                  "(the ops a shadow runs), so it would never run; name a backend whose manifest has "
                                  "them, or remove shadow"});
}

}  // namespace

// build(), with the problems recorded in `problems` instead of thrown (the table is then
// incomplete): one pass over the (op, device, dtype, reduce op) cells.
RouteTable RouteTable::collect(const std::vector<RouteSpec>& routes,
                               const std::vector<std::pair<std::string, Capabilities>>& backends,
                               const std::vector<std::string>& unavailable, std::vector<RouteProblem>& problems,
                               const dispatch::TuneStep* tune) {
  RouteTable table;
  for (const auto& b : backends) table.names_.push_back(b.first);
  BuildState state{routes, backends, unavailable, problems, {}, {}, tune};
  table.devices_ = indexRoutes(state);
  if (!problems.empty()) return table;  // the cells need every route's backends known

  std::map<std::string, int> noteIndex;
  const auto note = [&](const std::string& text) {
    if (text.empty()) return -1;
    auto [it, added] = noteIndex.emplace(text, static_cast<int>(table.notes_.size()));
    if (added) table.notes_.push_back(text);
    return it->second;
  };
  using SegmentKey = std::tuple<int64_t, int64_t, int, int, int, int, int, bool>;
  std::map<std::vector<SegmentKey>, int> listIndex;
  const auto intern = [&](const std::vector<Segment>& segments) {
    std::vector<SegmentKey> key;
    for (const auto& s : segments)
      key.emplace_back(s.minBytes, s.maxBytes, s.backend, s.route, s.note, s.shadow, s.live, s.tuned);
    auto [it, added] = listIndex.emplace(key, static_cast<int>(table.lists_.size()));
    if (added) table.lists_.push_back(segments);
    return it->second;
  };
  std::map<std::vector<int>, int> liveIndex;
  const auto internLive = [&](const std::vector<int>& candidates) {
    auto [it, added] = liveIndex.emplace(candidates, static_cast<int>(table.liveLists_.size()));
    if (added) table.liveLists_.push_back(candidates);
    return it->second;
  };
  for (int o = 0; o < kNumOpTypes; ++o) {
    const auto op = static_cast<OpType>(o);
    if (servedByHost(op)) continue;
    for (int d = 0; d < kNumDeviceTypes; ++d) {
      const auto dev = static_cast<DeviceType>(d);
      if (!table.devices_.has(dev)) continue;
      std::set<int64_t> points = {0};
      const std::vector<int> matching = matchingRoutes(state, op, dev, points);
      const std::vector<int64_t> starts(points.begin(), points.end());
      if (!checkCoverage(state, op, dev, matching, starts)) continue;
      const int dtypeSlots = carriesData(op) ? kNumDTypes : 1;
      const int ropSlots = isReduction(op) ? ReduceOp::kNumKinds : 1;
      for (int t = 0; t < dtypeSlots; ++t) {
        for (int k = 0; k < ropSlots; ++k) {
          const auto dtype = carriesData(op) ? std::optional<DType>(static_cast<DType>(t)) : std::nullopt;
          const auto rop = isReduction(op) ? std::optional<ReduceOp::Kind>(static_cast<ReduceOp::Kind>(k))
                                           : std::nullopt;
          std::vector<Candidate> candidates, unable;
          cellCandidates(state, matching, op, dev, dtype, rop, candidates, unable);
          std::vector<Segment> segments = cellSegments(state, candidates, unable, starts, op, dev, dtype, rop, note);
          if (tune) segments = tuneCell(state, segments, op, dev, dtype, rop, note);
          liveCell(state, segments, op, dev, dtype, rop, internLive);
          const int list = intern(segments);
          // Slots a cell ignores (dtype of a barrier, reduce op of a broadcast) share its list.
          for (int tt = 0; tt < kNumDTypes; ++tt) {
            if (carriesData(op) && tt != t) continue;
            for (int kk = 0; kk < ReduceOp::kNumKinds; ++kk) {
              if (isReduction(op) && kk != k) continue;
              table.cells_[((static_cast<size_t>(o) * kNumDeviceTypes + d) * kNumDTypes + tt) * ReduceOp::kNumKinds +
                           kk] = list;
            }
          }
        }
      }
    }
  }
  checkShadowsServe(state);
  if (!problems.empty()) return table;
  table.markUsed();
  return table;
}

RouteTable RouteTable::build(const std::vector<RouteSpec>& routes,
                             const std::vector<std::pair<std::string, Capabilities>>& backends) {
  return build(routes, backends, {});
}

namespace {
// Each backend's manifest from its plugin's descriptor (every op for a plugin that did not
// load, so its routes are accepted and fail only when used) and why it cannot run here.
void manifestsOf(const Config& config, const PluginRegistry& registry,
                 std::vector<std::pair<std::string, Capabilities>>& manifests, std::vector<std::string>& unavailable) {
  for (const auto& [name, ref] : config.backends) {
    const PluginEntry* e = registry.find(ref.plugin);
    unavailable.push_back(!e ? "plugin '" + ref.plugin + "' not found" : e->unavailable);
    if (e && e->descriptor) {
      manifests.emplace_back(name, e->descriptor->capabilities);
    } else {
      manifests.emplace_back(name, Capabilities{Capabilities::allOps(),
                                                Capabilities::allDTypes(),
                                                Capabilities::allReduceOps(),
                                                EnumSet<DeviceType>::all(kNumDeviceTypes),
                                                {}});
    }
  }
}
}  // namespace

RouteTable RouteTable::forConfig(const Config& config, const PluginRegistry& registry) {
  std::vector<std::pair<std::string, Capabilities>> manifests;
  std::vector<std::string> unavailable;
  manifestsOf(config, registry, manifests, unavailable);
  return build(config.routes, manifests, unavailable);
}

namespace {
// What a tuner's plugin threw, as a PluginError naming it, where it is configured and
// what to do (a plugin's own Error keeps its text).
[[noreturn]] void tunerFailed(const PluginRef& ref, const std::string& what, const char* during) {
  throw PluginError("tuner plugin '" + ref.plugin + "' (configured at " + ref.where + ") failed " + during + ": " +
                    what + "; fix its options there, or remove `tuner:` to route in the config's order");
}
}  // namespace

RouteTable RouteTable::forGroup(const Config& config, const PluginRegistry& registry, const TableSite& site) {
  if (!config.tuner) return forConfig(config, registry);
  std::vector<std::pair<std::string, Capabilities>> manifests;
  std::vector<std::string> unavailable;
  manifestsOf(config, registry, manifests, unavailable);
  const PluginRef& ref = *config.tuner;
  const PluginEntry& entry = registry.require(ref.plugin, PluginKind::Tuner);
  TunerContext context;
  context.groupName = site.groupName;
  context.rank = site.rank;
  context.worldSize = site.worldSize;
  context.localWorldSize = site.localWorldSize;
  context.logger = std::make_shared<Logger>(ref.plugin,
                                            "group " + site.groupName + " rank " + std::to_string(site.rank));
  std::unique_ptr<Tuner> tuner;
  try {
    tuner = entry.descriptor->createTuner(ref.options, context);
  } catch (const std::exception& e) {
    tunerFailed(ref, e.what(), "to start");
  }
  if (!tuner) tunerFailed(ref, "its factory returned no tuner", "to start");
  dispatch::TuneStep step{*tuner, ref.plugin, {}, {}, {}};
  step.shape.worldSize = site.worldSize;
  step.shape.localWorldSize = site.localWorldSize;
  for (const auto& [name, backend] : config.backends) {
    step.backends.push_back(name);
    step.plugins.push_back(backend.plugin);
  }
  std::vector<RouteProblem> problems;
  RouteTable table;
  try {
    table = collect(config.routes, manifests, unavailable, problems, &step);
  } catch (const PluginError&) {
    throw;  // route_tuning's refusal of an answer, which names the tuner already
  } catch (const std::exception& e) {
    tunerFailed(ref, e.what(), "while ordering a route");
  }
  if (!problems.empty()) throwProblems(std::move(problems));
  return table;
}

uint64_t RouteTable::fingerprint() const {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  const auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) h = (h ^ ((v >> (8 * i)) & 0xff)) * 1099511628211ull;
  };
  for (const auto& name : names_) {
    for (char c : name) mix(static_cast<unsigned char>(c));
    mix(0);
  }
  for (int cell : cells_) {
    mix(0xce11);
    for (const Segment& s : lists_[cell]) {
      mix(static_cast<uint64_t>(s.minBytes));
      mix(static_cast<uint64_t>(s.maxBytes));
      mix(static_cast<uint64_t>(s.backend));
      mix(static_cast<uint64_t>(s.shadow));
      if (s.live >= 0)
        for (int c : liveLists_[static_cast<size_t>(s.live)]) mix(static_cast<uint64_t>(c) + 0x11e);
    }
  }
  return h;
}

std::vector<RouteProblem> RouteTable::problemsOf(const Config& config, const PluginRegistry& registry) {
  std::vector<std::pair<std::string, Capabilities>> manifests;
  std::vector<std::string> unavailable;
  manifestsOf(config, registry, manifests, unavailable);
  std::vector<RouteProblem> problems;
  collect(config.routes, manifests, unavailable, problems);
  return problems;
}

std::string RouteTable::whyUnserved(OpType op, DeviceType device, int64_t bytes, DType dtype,
                                    ReduceOp::Kind reduceOp) const {
  for (const Segment& s : segments(op, device, dtype, reduceOp))
    if (bytes >= s.minBytes && bytes <= s.maxBytes && s.note >= 0) return notes_[s.note];
  return std::string("no route serves ") + opName(op) + " on " + deviceTypeName(device);
}

// Lines of one section of describe(): `line` renders a segment ("" to leave it out). The
// (dtype, reduce op) cells of one op whose lines are alike merge into one row: dtypes
// with the same reduce ops share it, and a list of every dtype or reduce op is left out.
std::string RouteTable::describeRows(const std::function<std::string(const Segment&)>& line) const {
  std::string out;
  for (int d = 0; d < kNumDeviceTypes; ++d) {
    const auto dev = static_cast<DeviceType>(d);
    if (!devices_.has(dev)) continue;
    for (int o = 0; o < kNumOpTypes; ++o) {
      const auto op = static_cast<OpType>(o);
      const int dtypeSlots = carriesData(op) ? kNumDTypes : 1;
      const int ropSlots = isReduction(op) ? ReduceOp::kNumKinds : 1;
      // The rendered lines of each cell (with "RANGE" for the byte range), and which
      // cells share them: by dtype, the mask of reduce ops.
      std::vector<std::string> order;
      std::map<std::string, std::vector<std::pair<uint64_t, std::vector<int>>>> groups;
      for (int t = 0; t < dtypeSlots; ++t) {
        std::map<std::string, uint64_t> masks;
        std::vector<std::string> seen;
        for (int k = 0; k < ropSlots; ++k) {
          const auto& list = lists_
              [cells_[((static_cast<size_t>(o) * kNumDeviceTypes + d) * kNumDTypes + t) * ReduceOp::kNumKinds + k]];
          std::string lines;
          for (const Segment& s : list) {
            const std::string text = line(s);
            if (!text.empty()) lines += range(s.minBytes, s.maxBytes) + text + "\n";
          }
          if (lines.empty()) continue;
          if (!masks.count(lines)) seen.push_back(lines);
          masks[lines] |= 1ull << k;
        }
        for (const auto& lines : seen) {
          if (!groups.count(lines)) order.push_back(lines);
          auto& g = groups[lines];
          const uint64_t mask = masks[lines];
          auto it = std::find_if(g.begin(), g.end(), [&](const auto& e) { return e.first == mask; });
          if (it == g.end()) g.push_back({mask, {t}});
          else it->second.push_back(t);
        }
      }
      for (const auto& lines : order) {
        for (const auto& [mask, dtypes] : groups[lines]) {
          std::string keys = std::string(deviceTypeName(dev)) + " " + opName(op);
          if (carriesData(op) && static_cast<int>(dtypes.size()) < kNumDTypes) {
            std::vector<std::string> names;
            for (int t : dtypes) names.push_back(dtypeName(static_cast<DType>(t)));
            keys += " " + join(names, ",");
          }
          if (isReduction(op) && mask != (1ull << ReduceOp::kNumKinds) - 1) {
            std::vector<std::string> names;
            for (int k = 0; k < ReduceOp::kNumKinds; ++k)
              if (mask & (1ull << k)) names.push_back(reduceOpName(static_cast<ReduceOp::Kind>(k)));
            keys += " " + join(names, ",");
          }
          for (size_t at = 0; at < lines.size();) {
            const size_t nl = lines.find('\n', at);
            out += keys + " " + lines.substr(at, nl - at) + "\n";
            at = nl + 1;
          }
        }
      }
    }
  }
  return out;
}

std::string RouteTable::describeLive() const {
  return describeRows(
      [&](const Segment& s) { return s.rerouted ? " -> " + names_[s.backend] + ": " + notes_[s.note] : ""; });
}

std::string RouteTable::describe() const {
  std::string out = describeRows([&](const Segment& s) {
    if (s.backend < 0) return std::string();
    std::string line = " -> " + names_[s.backend];
    if (s.live >= 0) {
      std::string list;
      for (int c : liveLists_[static_cast<size_t>(s.live)]) list += (list.empty() ? "" : ", ") + names_[c];
      return line + " (live candidates " + list + ")";
    }
    return line + (s.shadow < 0 ? "" : " (shadow " + names_[s.shadow] + ")");
  });
  const std::string fellBack = describeRows([&](const Segment& s) {
    return s.backend < 0 || s.note < 0 || s.tuned || s.rerouted ? ""
                                                                : " -> " + names_[s.backend] + ": " + notes_[s.note];
  });
  const std::string rerouted = describeLive();
  const std::string tuned = describeRows(
      [&](const Segment& s) { return s.tuned ? " -> " + names_[s.backend] + ": " + notes_[s.note] : ""; });
  const std::string unserved = describeRows([&](const Segment& s) {
    return s.backend >= 0 ? "" : ": " + (s.note >= 0 ? notes_[s.note] : std::string("no route"));
  });
  if (!fellBack.empty()) out += "fell back past an earlier choice:\n" + fellBack;
  if (!tuned.empty()) out += "chosen by the tuner:\n" + tuned;
  if (!rerouted.empty()) out += "chosen live (tune: live):\n" + rerouted;
  if (!unserved.empty()) out += "unserved (calls fail; route them with op, dtype or reduce_op keys):\n" + unserved;
  return out;
}

}  // namespace commhost
