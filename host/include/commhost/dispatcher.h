// SPDX-License-Identifier: Apache-2.0
// Dispatcher: picks the backend for each (op, device, dtype, reduce op, message size).
//
// Built once from the config's routes and the backends' capability manifests, so
// nothing is decided per call: a lookup is an array index by (op, device, dtype, reduce
// op) plus a scan of that cell's few byte-range segments.
//
// Which route serves a cell: the most specific route whose keys match it. Specificity
// ranks the keys by how narrow a slice of traffic each one names: op, then dtype, then
// reduce op, then device, then the narrower byte range (an op route beats any route
// without an op; among routes naming the same keys, the narrower range wins). A key a
// route leaves out matches only what some backend of its list serves, so a specialised
// backend falls back to a general one: `{ backend: mine }` applies to mine's ops, devices,
// dtypes and reduce ops only. Within the chosen route, the cell goes to the first listed
// backend whose manifest serves its op, device, dtype and reduce op
// (`backend: [mine, shm, gloo]`); describe() lists the cells that fell past an earlier one.
// The dtype slot is ignored for ops without data (barrier) and the reduce-op slot for
// ops that do not reduce: those cells resolve once and share one segment list.
//
// Build errors (ConfigError) name the route's file:line:col and the backends:
// - a route whose explicitly named op, device, dtype or reduce op none of its backends
//   serves (each backend's reason is given), or a reduce_op on a non-reducing op;
// - two equally specific routes overlapping with different backends;
// - an op, on a device some route serves, that no route serves (or with a gap in sizes).
// A cell left unserved only because no route's backends have its dtype or reduce op is
// not an error (most configs name no dtype): a call there fails with InvalidArgument
// pointing to `routes: - { op, dtype, reduce_op, backend }`.
// Lookups are lock-free and allocation-free; the table is immutable once built.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "commhost/config.h"
#include "commhost/export.h"
#include "commhost/sdk/capabilities.h"

namespace commhost {

class PluginRegistry;
namespace dispatch {
struct TuneStep;
}

// The group a table is built for, as a tuner sees it (commhost/sdk/tuner.h).
struct TableSite {
  std::string groupName;
  int rank = 0;
  int worldSize = 1;
  int localWorldSize = 1;  // ranks of the job on this host
};

// One thing wrong with a config's routes, as the route table finds it.
struct COMMHOST_API RouteProblem {
  std::string where;         // the route's "FILE:LINE:COL"; "" for the table as a whole
  std::string message;       // what is wrong and what to do
  bool uncovered = false;    // an op, device or byte range no route serves
  std::string text() const;  // "where: message", as RouteTable::build's error lists it
};

class COMMHOST_API RouteTable {
 public:
  struct Segment {
    int64_t minBytes, maxBytes;  // inclusive
    int backend;                 // index into backendNames(); -1 where the cell is unserved
    int route;                   // index into the config's routes, for messages; -1 if unserved
    int note;                    // index of why it fell back (or is unserved) for describe(); -1 if neither
    int shadow = -1;             // the route's shadow backend where it serves this cell and op; else -1
    bool tuned = false;          // the config's tuner put `backend` before the route's first choice (note says)
    // tune: live: index into the table's candidate lists (liveCandidates()), -1 when the
    // segment has none; `shadow` is then the first candidate.
    int live = -1;
    bool rerouted = false;  // a live switch moved it to `backend` (note says why)
    bool operator==(const Segment& o) const {
      return minBytes == o.minBytes && maxBytes == o.maxBytes && backend == o.backend && route == o.route &&
             note == o.note && shadow == o.shadow && tuned == o.tuned && live == o.live && rerouted == o.rerouted;
    }
  };

  // One size range of one cell (CPU) that live re-routing moves to another backend.
  struct Reroute {
    OpType op;
    DType dtype;
    ReduceOp::Kind reduceOp;  // ignored for ops that do not reduce
    int64_t minBytes, maxBytes;
    int backend;          // index into backendNames(): the candidate taking the range over
    std::string note;     // why, for describe()
    bool settle = false;  // instead: `backend` stops being a candidate in the range (it lost there)
    int from = -1;        // only the parts routed to this backend, the one compared (-1: any)
  };

  // The table for a loaded config: each backend's manifest comes from its plugin's
  // descriptor; a plugin that did not load is taken to have every op, so its routes
  // are accepted and fail only when used. A plugin that cannot run here (it did not load,
  // or its probe says why) is unavailable: see build().
  // The config's `tuner:` is not applied (it needs a group): see forGroup.
  static RouteTable forConfig(const Config& config, const PluginRegistry& registry);
  // The table a group at `site` uses: forConfig's, with the config's tuner (when it names
  // one) created for this build, asked per size class wherever a route lists two or more
  // backends that serve a cell, and destroyed. Throws PluginError when the tuner's plugin
  // is unusable, its factory fails or it answers with anything but a reordering.
  static RouteTable forGroup(const Config& config, const PluginRegistry& registry, const TableSite& site);
  // What forConfig() would refuse, one record per problem (empty: nothing): the config
  // loader reports each at its place in the file.
  static std::vector<RouteProblem> problemsOf(const Config& config, const PluginRegistry& registry);
  // `backends` gives each backend name's manifest; `unavailable[i]`, when present and not
  // empty, says why backends[i] cannot run here. A route's list passes over such a backend
  // to the next one that serves the cell (the note says so, with the reason); a cell that
  // only unavailable backends serve goes to the first of them, so its calls fail naming why.
  static RouteTable build(const std::vector<RouteSpec>& routes,
                          const std::vector<std::pair<std::string, Capabilities>>& backends,
                          const std::vector<std::string>& unavailable);
  // Every backend available (an overload, not a default argument: programs built against
  // the two-argument form keep their symbol).
  static RouteTable build(const std::vector<RouteSpec>& routes,
                          const std::vector<std::pair<std::string, Capabilities>>& backends);

  // The backend index for this call, or -1 when no route serves it. `dtype` is ignored
  // for ops without data and `reduceOp` for ops that do not reduce.
  // No defaults for dtype and reduce op: a caller that forgot them would route every
  // call as f32 sum, silently.
  int route(OpType op, DeviceType device, int64_t bytes, DType dtype, ReduceOp::Kind reduceOp) const {
    const Segment* s = find(op, device, bytes, dtype, reduceOp);
    return s ? s->backend : -1;
  }
  // The segment serving this call (its backend may be -1: unserved), or null.
  const Segment* find(OpType op, DeviceType device, int64_t bytes, DType dtype, ReduceOp::Kind reduceOp) const {
    for (const Segment& s : segments(op, device, dtype, reduceOp))
      if (bytes >= s.minBytes && bytes <= s.maxBytes) return &s;
    return nullptr;
  }
  // The ops a shadow backend runs (one input, one output to compare); a route's other
  // ops run on its backend alone.
  static bool shadowable(OpType op) {
    return op == OpType::Allreduce || op == OpType::Broadcast || op == OpType::AllgatherIntoTensor;
  }
  // Whether a shadow's sampling `rate` picks the call with this seq: a hash of seq below
  // the rate, so every rank picks the same calls (a shadow backend sees only the sampled
  // ones) and the picks spread over the calls instead of every Nth, which could alias
  // with a workload's period.
  static bool sampled(uint64_t seq, double rate) {
    uint64_t z = seq + 0x9e3779b97f4a7c15ull;  // splitmix64's finalizer
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * 0x1.0p-53 < rate;
  }
  // Which of n live candidates the sampled call with this seq runs: a hash of seq of its
  // own (not seq % n, which would alias with a workload's period, say two sizes a step and
  // two candidates, so that one class only ever tried one of them; nor sampled()'s bits).
  static size_t livePick(uint64_t seq, size_t n) {
    uint64_t z = seq * 0xd6e8feb86659fd93ull + 0x2545f4914f6cdd1dull;
    z = (z ^ (z >> 32)) * 0xd6e8feb86659fd93ull;
    z ^= z >> 32;
    return static_cast<size_t>(z % n);
  }
  const std::vector<Segment>& segments(OpType op, DeviceType device, DType dtype, ReduceOp::Kind reduceOp) const {
    return lists_[cells_[cellOf(op, device, dtype, reduceOp)]];
  }
  const std::vector<std::string>& backendNames() const { return names_; }
  bool servesDevice(DeviceType device) const { return devices_.has(device); }
  // A hash of every cell's segments and the backends' names: equal tables, equal value.
  // Ranks compare it when a tuner built their tables (they must route every call alike).
  uint64_t fingerprint() const;
  // Whether some cell resolves to backends()[index]: a backend no cell uses is never
  // called, so the group does not create it and its features are not required.
  bool uses(int index) const { return index >= 0 && index < static_cast<int>(used_.size()) && used_[index]; }
  // Whether some cell resolves to backends()[index] as its backend (not only as a shadow).
  bool serves(int index) const { return index >= 0 && index < static_cast<int>(serves_.size()) && serves_[index]; }
  // tune: live (RouteSpec::live). A live segment's candidates: the route's other backends
  // that serve its cell here, in the route's order. A sampled call with seq s runs on
  // candidates[livePick(s, size())] beside the segment's backend (the same one on every rank).
  const std::vector<int>& liveCandidates(const Segment& s) const { return liveLists_[static_cast<size_t>(s.live)]; }
  bool hasLive() const { return liveLists_.size() > 1; }
  // Distinct segment and candidate lists held (each edit compacts: a job that re-routes
  // for days holds what its routes need, no more).
  size_t listCount() const { return lists_.size() + liveLists_.size(); }
  // A copy with each change applied (live_reroute.cc): the part of the cell's segments
  // within the range goes to `backend`, whose candidates become the backend it had and
  // the others (or, for a `settle`, keeps its backend and drops `backend` from its
  // candidates); the rest of the cell keeps what it had. A non-reducing op's change
  // applies to every reduce-op slot of its dtype, as lookups ignore that slot.
  RouteTable rerouted(const std::vector<Reroute>& changes) const;
  // A copy where `backend` is no longer anyone's live candidate (it disagreed once).
  RouteTable withoutCandidate(int backend) const;

  // Why route() gave -1 for this call, for its error message (not on the hot path).
  std::string whyUnserved(OpType op, DeviceType device, int64_t bytes, DType dtype, ReduceOp::Kind reduceOp) const;
  // The resolved table for `config check`: one line per run of cells that resolve alike
  // ("cpu allreduce f32,f64 sum,max 0..65535 bytes -> shm"; a dtype or reduce-op list is
  // left out when it is every one), then the cells that fell back past an earlier listed
  // backend and why, then the cells no route serves.
  std::string describe() const;
  // describe()'s "chosen live" rows alone (tune: live): what live routing moved, and why.
  std::string describeLive() const;

 private:
  static RouteTable collect(const std::vector<RouteSpec>& routes,
                            const std::vector<std::pair<std::string, Capabilities>>& backends,
                            const std::vector<std::string>& unavailable, std::vector<RouteProblem>& problems,
                            const dispatch::TuneStep* tune = nullptr);
  std::string describeRows(const std::function<std::string(const Segment&)>& line) const;
  static size_t cellOf(OpType op, DeviceType device, DType dtype, ReduceOp::Kind reduceOp) {
    return ((static_cast<size_t>(op) * kNumDeviceTypes + static_cast<size_t>(device)) * kNumDTypes +
            static_cast<size_t>(dtype)) *
               ReduceOp::kNumKinds +
           static_cast<size_t>(reduceOp);
  }
  // live_reroute.cc: `list` with `change`'s range moved, as a new list of this table.
  int reroutedList(int list, const Reroute& change);
  void compact();   // drops the lists and candidate lists no cell reaches (after an edit)
  void markUsed();  // used_ and serves_ from the lists

  static constexpr size_t kNumCells = static_cast<size_t>(kNumOpTypes) * kNumDeviceTypes * kNumDTypes *
                                      ReduceOp::kNumKinds;
  std::vector<int> cells_ = std::vector<int>(kNumCells, 0);  // index into lists_
  std::vector<std::vector<Segment>> lists_{{}};              // distinct segment lists; lists_[0] is empty
  std::vector<std::vector<int>> liveLists_{{}};              // distinct live candidate lists; [0] is unused
  std::vector<std::string> names_;
  std::vector<std::string> notes_;
  std::vector<bool> used_, serves_;
  EnumSet<DeviceType> devices_;
};

}  // namespace commhost
