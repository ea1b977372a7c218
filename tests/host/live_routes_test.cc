// SPDX-License-Identifier: Apache-2.0
// Live re-routing (tune: live): the route table's candidates and edits, the ranks' shared
// decision, and real groups (ranks as threads over a HashStore) that move a size class to
// a faster candidate at one sync point and drop a wrong candidate.
#include <gtest/gtest.h>

#include "commhost/process_group.h"
#include "group/live_routes.h"
#include "test_util.h"

namespace commhost::test {
namespace {

Capabilities cpuAll() {
  return {Capabilities::allOps(), Capabilities::allDTypes(), Capabilities::allReduceOps(), {DeviceType::CPU}, {}};
}

// One live route over a, b and c (all serving every op).
RouteTable liveTable() {
  RouteSpec r;
  r.device = DeviceType::CPU;
  r.backend = "a";
  r.fallback = {"b", "c"};
  r.live = true;
  r.where = "routes[0]";
  return RouteTable::build({r}, {{"a", cpuAll()}, {"b", cpuAll()}, {"c", cpuAll()}});
}

const RouteTable::Segment& at(const RouteTable& t, OpType op, int64_t bytes, DType dtype = DType::Float32,
                              ReduceOp::Kind k = ReduceOp::Sum) {
  const RouteTable::Segment* s = t.find(op, DeviceType::CPU, bytes, dtype, k);
  if (!s) throw std::runtime_error("no segment");
  return *s;
}

TEST(LiveRoutes, TheTableListsCandidatesAndMovesOneSizeClass) {
  const RouteTable t = liveTable();
  ASSERT_TRUE(t.hasLive());
  const auto& s = at(t, OpType::Allreduce, 4096);
  EXPECT_EQ(s.backend, 0);
  EXPECT_EQ(t.liveCandidates(s), (std::vector<int>{1, 2}));
  EXPECT_EQ(s.shadow, 1);
  EXPECT_EQ(at(t, OpType::Barrier, 0).live, -1) << "barrier carries no data to compare";
  EXPECT_NE(t.describe().find("-> a (live candidates b, c)"), std::string::npos) << t.describe();

  const RouteTable moved = t.rerouted(
      {{OpType::Allreduce, DType::Float32, ReduceOp::Sum, 2049, 4096, 2, "tune: live: c was faster"}});
  EXPECT_EQ(at(moved, OpType::Allreduce, 4096).backend, 2);
  EXPECT_EQ(at(moved, OpType::Allreduce, 2049).backend, 2);
  EXPECT_TRUE(at(moved, OpType::Allreduce, 4096).rerouted);
  EXPECT_EQ(moved.liveCandidates(at(moved, OpType::Allreduce, 4096)), (std::vector<int>{0, 1}))
      << "the backend it left stays a candidate, first";
  EXPECT_EQ(at(moved, OpType::Allreduce, 2048).backend, 0);
  EXPECT_EQ(at(moved, OpType::Allreduce, 4097).backend, 0);
  EXPECT_EQ(at(moved, OpType::Allreduce, 4096, DType::Float64).backend, 0) << "another dtype is another cell";
  EXPECT_EQ(at(moved, OpType::Allreduce, 4096, DType::Float32, ReduceOp::Max).backend, 0);
  EXPECT_EQ(at(t, OpType::Allreduce, 4096).backend, 0) << "the original table is untouched";
  EXPECT_NE(moved.fingerprint(), t.fingerprint());
  EXPECT_NE(moved.describe().find("chosen live (tune: live):"), std::string::npos) << moved.describe();
  EXPECT_NE(moved.describe().find("c was faster"), std::string::npos) << moved.describe();

  // A broadcast ignores the reduce-op slot: its move applies to every slot.
  const RouteTable bcast = t.rerouted(
      {{OpType::Broadcast, DType::Int32, ReduceOp::Sum, 0, 1, 1, "tune: live: b was faster"}});
  EXPECT_EQ(at(bcast, OpType::Broadcast, 1, DType::Int32, ReduceOp::Max).backend, 1);
  EXPECT_EQ(at(bcast, OpType::Broadcast, 2, DType::Int32).backend, 0);

  // c dropped: no longer a candidate anywhere, and the class it had won goes back to a.
  const RouteTable dropped = moved.withoutCandidate(2);
  EXPECT_EQ(dropped.liveCandidates(at(dropped, OpType::Allreduce, 64)), std::vector<int>{1});
  EXPECT_EQ(at(dropped, OpType::Allreduce, 4096).backend, 0);
  EXPECT_FALSE(at(dropped, OpType::Allreduce, 4096).rerouted);
  EXPECT_EQ(dropped.liveCandidates(at(dropped, OpType::Allreduce, 4096)), std::vector<int>{1});
  EXPECT_FALSE(dropped.serves(2)) << "serves() counts only the lists cells use";
  // A move limited to the parts routed to `from` leaves a part routed elsewhere alone.
  RouteTable::Reroute onlyFromB{OpType::Allreduce, DType::Float32, ReduceOp::Sum, 2049, 4096, 1, "b", false, 1};
  EXPECT_EQ(at(moved.rerouted({onlyFromB}), OpType::Allreduce, 4096).backend, 2) << "c's part was not compared";
  const RouteTable none = dropped.withoutCandidate(1);
  EXPECT_EQ(at(none, OpType::Allreduce, 64).live, -1);
  EXPECT_EQ(at(none, OpType::Allreduce, 64).shadow, -1) << "no candidate left: nothing sampled";
}

TEST(LiveRoutes, EditsKeepTheTableTheSizeOfItsRoutes) {
  const RouteTable t = liveTable();
  RouteTable flipped = t;
  for (int i = 0; i < 200; ++i) {
    const int to = (i % 2 == 0) ? 2 : 0;  // a class won by c, then won back by a
    flipped = flipped.rerouted({{OpType::Allreduce, DType::Float32, ReduceOp::Sum, 2049, 4096, to, "flip"}});
    flipped = flipped.rerouted({{OpType::Broadcast, DType::Int32, ReduceOp::Sum, 0, 1, to == 2 ? 1 : 0, "flip"}});
  }
  EXPECT_EQ(at(flipped, OpType::Allreduce, 4096).backend, 0);
  EXPECT_EQ(at(flipped, OpType::Broadcast, 1, DType::Int32, ReduceOp::Max).backend, 0);
  EXPECT_LE(flipped.listCount(), t.listCount() + 4) << "an edit must not leave the lists it replaced behind";
  const RouteTable dropped = flipped.withoutCandidate(2).withoutCandidate(1);
  EXPECT_FALSE(dropped.hasLive()) << "no candidate list is left once every candidate is dropped";
  EXPECT_EQ(at(dropped, OpType::Allreduce, 4096).backend, 0);
}

LiveSummary summary(int64_t cls, const std::string& backend, const std::string& cand, uint64_t n, double b, double c,
                    uint64_t bad = 0) {
  LiveSummary s;
  s.key = LiveKey{OpType::Allreduce, DType::Float32, ReduceOp::Sum, cls, backend, cand};
  s.samples = n;
  s.backendUs = b;
  s.candidateUs = c;
  s.bad = bad;
  if (bad) s.firstBad = "element 0 of 64 (f32): 3 from the backend, 4 from the shadow";
  return s;
}

TEST(LiveRoutes, TheDecisionNeedsEveryRanksWindowAndTheMarginOnTheSlowestRank) {
  const RouteTable t = liveTable();
  LiveRules rules;
  rules.window = 8;
  rules.margin = 0.1;
  // Faster on both ranks by far: moves 4 KiB (class 4096) to b.
  auto d = decideLive({{summary(4096, "a", "b", 8, 100, 20)}, {summary(4096, "a", "b", 8, 110, 30)}}, t, rules);
  ASSERT_EQ(d.switches.size(), 1u);
  EXPECT_EQ(d.switches[0].backend, 1);
  EXPECT_EQ(d.switches[0].minBytes, 2049);
  EXPECT_EQ(d.switches[0].maxBytes, 4096);
  EXPECT_NE(d.lines[0].find("allreduce f32 sum 2049..4096 B: a -> b"), std::string::npos) << d.lines[0];
  EXPECT_EQ(nextLiveInterval(d, 50, 400), 50u) << "a switch: rounds at the base rate again";
  // One rank short of the window: no move, and the rounds stay at the base rate.
  d = decideLive({{summary(4096, "a", "b", 8, 100, 20)}, {summary(4096, "a", "b", 7, 100, 20)}}, t, rules);
  EXPECT_TRUE(d.empty());
  EXPECT_TRUE(d.learning);
  EXPECT_EQ(nextLiveInterval(d, 50, 200), 50u);
  // Nothing sampled that is still in play (here: measured under another table) and nothing
  // to change: each round doubles the wait, up to 64x.
  d = decideLive({{summary(4096, "b", "a", 8, 100, 20)}, {summary(4096, "b", "a", 8, 100, 20)}}, t, rules);
  EXPECT_TRUE(d.empty());
  EXPECT_FALSE(d.learning);
  EXPECT_EQ(nextLiveInterval(d, 50, 50), 100u);
  EXPECT_EQ(nextLiveInterval(d, 50, 3200), 3200u);
  // A rank that never sampled the class: no move.
  EXPECT_TRUE(decideLive({{summary(4096, "a", "b", 8, 100, 20)}, {}}, t, rules).empty());
  // Within the margin on the rank that waited least (a rank whose clock also ran while it
  // waited for the others shows more): the class stays, and b is no longer sampled there.
  d = decideLive({{summary(4096, "a", "b", 8, 300, 95)}, {summary(4096, "a", "b", 8, 100, 120)}}, t, rules);
  ASSERT_EQ(d.switches.size(), 1u);
  EXPECT_TRUE(d.switches[0].settle);
  EXPECT_TRUE(d.switched.empty());
  EXPECT_NE(d.lines[0].find("stays on a, b no longer sampled"), std::string::npos) << d.lines[0];
  const RouteTable settled = t.rerouted(d.switches);
  EXPECT_EQ(at(settled, OpType::Allreduce, 4096).backend, 0);
  EXPECT_FALSE(at(settled, OpType::Allreduce, 4096).rerouted);
  EXPECT_EQ(settled.liveCandidates(at(settled, OpType::Allreduce, 4096)), std::vector<int>{2});
  EXPECT_EQ(settled.liveCandidates(at(settled, OpType::Allreduce, 4097)), (std::vector<int>{1, 2}));
  // Two qualifying candidates: the faster one wins.
  d = decideLive({{summary(4096, "a", "b", 8, 100, 50), summary(4096, "a", "c", 8, 100, 40)}}, t, rules);
  ASSERT_EQ(d.switches.size(), 1u);
  EXPECT_EQ(d.switches[0].backend, 2);
  // Measured under another table (the class is no longer on a): ignored.
  EXPECT_TRUE(decideLive({{summary(4096, "b", "a", 8, 100, 20)}}, t, rules).empty());
  // After a switch of the class, it needs twice the window.
  rules.flips[{OpType::Allreduce, DType::Float32, ReduceOp::Sum, 4096}] = 1;
  EXPECT_EQ(rules.windowOf(summary(4096, "a", "b", 0, 0, 0).key), 16u);
  EXPECT_TRUE(decideLive({{summary(4096, "a", "b", 8, 100, 20)}}, t, rules).empty());
  EXPECT_FALSE(decideLive({{summary(4096, "a", "b", 16, 100, 20)}}, t, rules).empty());
}

TEST(LiveRoutes, ACandidateThatDisagreedOnceIsDroppedHoweverFast) {
  const RouteTable t = liveTable();
  LiveRules rules;
  rules.window = 4;
  const auto d = decideLive({{summary(4096, "a", "c", 50, 100, 1, 0)}, {summary(4096, "a", "c", 50, 100, 1, 1)}}, t,
                            rules);
  EXPECT_TRUE(d.switches.empty());
  ASSERT_EQ(d.dropped, std::vector<int>{2});
  EXPECT_NE(d.lines[0].find(
                "dropped c from live routing until a hot swap or membership change rebuilds the routes: on rank 1"),
            std::string::npos)
      << d.lines[0];
  EXPECT_NE(d.lines[0].find("3 from the backend, 4 from the shadow"), std::string::npos) << d.lines[0];
  // Once dropped, the same record does not drop it again (it is no longer a candidate).
  EXPECT_TRUE(decideLive({{summary(4096, "a", "c", 50, 100, 1, 1)}}, t.withoutCandidate(2), rules).empty());
}

TEST(LiveRoutes, SummariesTravelAsVersionedJsonAndAForeignOneIsNamed) {
  const std::vector<LiveSummary> in{summary(64, "gloo", "shm", 12, 180.5, 2.25, 1)};
  const auto out = decodeLive(3, encodeLive(3, in));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].key, in[0].key);
  EXPECT_EQ(out[0].samples, 12u);
  EXPECT_EQ(out[0].backendUs, 180.5);
  EXPECT_EQ(out[0].candidateUs, 2.25);
  EXPECT_EQ(out[0].firstBad, in[0].firstBad);
  EXPECT_THROW_WITH(decodeLive(2, R"({"version": 99, "rank": 2, "cells": []})"), InvalidArgument,
                    "rank 2's live-routing summary is unreadable", "version 99");
  EXPECT_THROW_WITH(decodeLive(1, "garbage"), InvalidArgument, "rank 1's live-routing summary");
}

TEST(LiveRoutes, StatsKeepTheNewestSamplesAndForgetACellBothWays) {
  LiveStats stats(4);
  LiveRules rules;
  rules.window = 4;
  const LiveKey k{OpType::Allreduce, DType::Float32, ReduceOp::Sum, 0, "a", "b"};
  for (int i = 0; i < 10; ++i) stats.add(k, 3000, 100 + i, 10, LiveStats::Outcome::Agreed, "");
  stats.add(k, 3000, 1, 1, LiveStats::Outcome::BackendFailed, "the backend failed");  // tells nothing of b
  auto s = stats.summaries(rules, 0);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].key.sizeClass, 4096);
  EXPECT_EQ(s[0].samples, 4u);
  EXPECT_EQ(s[0].backendUs, 107.5) << "the median of the newest four: 106..109";
  EXPECT_EQ(s[0].bad, 0u);
  LiveKey back = k;
  std::swap(back.backend, back.candidate);
  stats.add(back, 4000, 1, 2, LiveStats::Outcome::Disagreed, "differs");
  EXPECT_EQ(stats.summaries(rules, 0).size(), 2u);
  LiveKey cell = k;
  cell.sizeClass = 4096;
  stats.forget(cell);
  EXPECT_TRUE(stats.summaries(rules, 0).empty());
  // A key of an older table (a swap since) is dropped by the next summaries of a newer one.
  LiveKey older = k;
  older.base = 1;
  stats.add(older, 3000, 100, 10, LiveStats::Outcome::Agreed, "");
  EXPECT_TRUE(stats.summaries(rules, 2).empty());
  EXPECT_TRUE(stats.summaries(rules, 1).empty()) << "forgotten, not only left out";
}

TEST(LiveRoutes, ConfigNeedsCandidatesAndTakesNoShadow) {
  auto registry = testRegistry();
  const std::string head = "backends: { gloo: {}, ref: { plugin: storecoll } }\n";
  EXPECT_THROW_WITH(configFrom(head + "routes: [{ device: cpu, backend: gloo, tune: live }]\n", *registry), ConfigError,
                    "tune: live needs candidates", "backend: [gloo, shm]");
  EXPECT_THROW_WITH(
      configFrom(head + "routes: [{ device: cpu, backend: [gloo, ref], tune: live, shadow: ref }]\n", *registry),
      ConfigError, "a route takes one of them");
  EXPECT_THROW_WITH(configFrom(head + "routes: [{ device: cpu, backend: [gloo, ref], tune: fast }]\n", *registry),
                    ConfigError, "'fast' is not a tune mode: want live or off");
  const auto config = configFrom(
      head + "tune: { live_every: 5 }\nroutes: [{ device: cpu, backend: [gloo, ref], tune: live, sample: 0.5 }]\n",
      *registry);
  const Config& c = *config;
  ASSERT_EQ(c.routes.size(), 1u);
  EXPECT_TRUE(c.routes[0].live);
  EXPECT_EQ(c.routes[0].sample, 0.5);
  EXPECT_EQ(c.host.getInt("tune.live_every"), 5);
  EXPECT_NE(c.effectiveYaml.find("tune: live"), std::string::npos) << c.effectiveYaml;
  EXPECT_NE(c.effectiveYaml.find("sample: 0.5"), std::string::npos) << c.effectiveYaml;
}

// A live route whose first backend is slow by 20 ms an allreduce, gloo its candidate.
// 20 ms, not less: a 256 B gloo allreduce between two ranks sharing 2 loaded vCPUs has
// taken 4.7 ms (CI, Debian 13 stage, tests run two at a time), which a 5 ms delay did not
// beat by the 10% margin, and the class then stayed on slow.
constexpr const char* kSlowThenGloo =
    "group: { timeout: 20s }\n"
    "tune: { live_every: 2, live_window: 3 }\n"
    "backends: { slow: { plugin: storecoll, options: { op_delay: 20ms } },"
    " gloo: { options: { threads: 1, contexts: 1 } } }\n"
    "routes: [{ device: cpu, backend: [slow, gloo], tune: live, sample: 1 }]\n";

// Two ranks, a live route whose first backend is slow by 20 ms an allreduce: gloo, its
// candidate, takes every sampled call's class over at one sync point, on both ranks, and
// never moves back (the slow one, now the candidate, stays slower and stops being sampled).
TEST(LiveRoutes, AGroupMovesToTheFasterCandidateAtOneSyncPointAndStays) {
  auto groups = makeGroups(kSlowThenGloo, 2);
  std::vector<std::vector<std::string>> seen(2);  // the backend each step's class was routed to
  runRanks(2, [&](int r) {
    for (int iter = 0; iter < 40; ++iter) {
      checkedAllreduce(*groups[r], iter);  // every result right, whichever backend serves it
      groups[r]->syncPoint();
      const auto& t = groups[r]->routes();
      seen[r].push_back(
          t.backendNames()[t.route(OpType::Allreduce, DeviceType::CPU, 256, DType::Float32, ReduceOp::Sum)]);
    }
  });
  EXPECT_EQ(seen[0], seen[1]) << "the ranks switched at different sync points";
  EXPECT_EQ(seen[0].front(), "slow");
  EXPECT_EQ(seen[0].back(), "gloo");
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(groups[r]->generation(), 2u) << "one switch, then slow (now the candidate) lost and is no longer "
                                              "sampled there; no flapping back";
    const auto& t = groups[r]->routes();
    EXPECT_EQ(t.find(OpType::Allreduce, DeviceType::CPU, 256, DType::Float32, ReduceOp::Sum)->live, -1);
    EXPECT_NE(groups[r]->routes().describe().find("tune: live: gloo took"), std::string::npos)
        << groups[r]->routes().describe();
  }
}

// A hot swap builds its table from the config: the class is back on slow, and live routing
// starts over (the window is not the doubled one of a class that switched before).
TEST(LiveRoutes, AHotSwapStartsOverFromTheConfigsOrder) {
  const std::string yaml = kSlowThenGloo;
  auto groups = makeGroups(yaml, 2);
  auto registry = testRegistry();
  const auto config = configFrom(yaml, *registry);
  const auto routedTo = [](ProcessGroup& pg) {
    const auto& t = pg.routes();
    return t.backendNames()[t.route(OpType::Allreduce, DeviceType::CPU, 256, DType::Float32, ReduceOp::Sum)];
  };
  std::vector<std::string> afterSwap(2), atEnd(2);
  runRanks(2, [&](int r) {
    ProcessGroup& pg = *groups[r];
    for (int iter = 0; iter < 20 && routedTo(pg) == "slow"; ++iter) {
      checkedAllreduce(pg, iter);
      pg.syncPoint();
    }
    pg.reconfigure(config);
    afterSwap[r] = routedTo(pg);
    for (int iter = 0; iter < 30 && routedTo(pg) == "slow"; ++iter) {
      checkedAllreduce(pg, iter);
      pg.syncPoint();
    }
    atEnd[r] = routedTo(pg);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(afterSwap[r], "slow") << "the swapped-in table is the config's order";
    EXPECT_EQ(atEnd[r], "gloo");
    EXPECT_EQ(groups[r]->generation(), 3u) << "switch, swap, switch";
    // Decided over the configured window, not the doubled one of a class that switched before.
    EXPECT_NE(groups[r]->routes().describe().find("median of 3 sampled calls"), std::string::npos)
        << groups[r]->routes().describe();
  }
}

// A shrink builds a new table from the config: live routing starts over on the survivors,
// whose rounds stay alike (their keys are the new table's), and moves the class again.
TEST(LiveRoutes, AfterAShrinkTheSurvivorsStartOverAlike) {
  auto groups = makeGroups(kSlowThenGloo, 3);
  std::vector<std::vector<std::string>> seen(3);
  runRanks(3, [&](int r) {
    ProcessGroup& pg = *groups[r];
    for (int iter = 0; iter < 5; ++iter) {  // two rounds and a bit: live routing under way
      checkedAllreduce(pg, iter);
      pg.syncPoint();
    }
    if (r == 2) {  // leaves: alive, but not in the round, so the others decide without it
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      EXPECT_THROW(pg.shrink(shrinkWithin(std::chrono::milliseconds(500))), AbortedError);
      return;
    }
    pg.shrink(shrinkWithin(std::chrono::milliseconds(500)));
    for (int iter = 0; iter < 20; ++iter) {
      checkedAllreduce(pg, iter);
      pg.syncPoint();
      const auto& t = pg.routes();
      seen[r].push_back(
          t.backendNames()[t.route(OpType::Allreduce, DeviceType::CPU, 256, DType::Float32, ReduceOp::Sum)]);
    }
  });
  EXPECT_EQ(seen[0], seen[1]) << "the survivors switched at different sync points";
  EXPECT_EQ(seen[0].front(), "slow") << "the survivors' table is the config's order";
  EXPECT_EQ(seen[0].back(), "gloo");
}

// A candidate that is faster but wrong (adds one) is dropped at the first round and never
// chosen; the caller's results stay right throughout.
TEST(LiveRoutes, AWrongCandidateIsDroppedAndNeverChosen) {
  auto groups = makeGroups(
      "group: { timeout: 20s }\n"
      "tune: { live_every: 3, live_window: 2, live_margin: 0 }\n"
      "backends: { slow: { plugin: storecoll, options: { op_delay: 5ms } }, off: { plugin: offbyone } }\n"
      "routes: [{ device: cpu, backend: [slow, off], tune: live, sample: 1 }]\n",
      2);
  runRanks(2, [&](int r) {
    for (int iter = 0; iter < 15; ++iter) {
      checkedAllreduce(*groups[r], iter);
      groups[r]->syncPoint();
    }
  });
  for (int r = 0; r < 2; ++r) {
    const auto& t = groups[r]->routes();
    EXPECT_EQ(t.backendNames()[t.route(OpType::Allreduce, DeviceType::CPU, 256, DType::Float32, ReduceOp::Sum)],
              "slow");
    EXPECT_EQ(t.describe().find("live candidates"), std::string::npos) << t.describe();
    EXPECT_EQ(groups[r]->generation(), 1u) << "one routes-only swap: the drop";
    // Sampled until the first round only (three steps), then never again.
    const auto report = groups[r]->shadowReport(std::chrono::seconds(5));
    ASSERT_EQ(report.size(), 1u);
    EXPECT_EQ(report[0].shadow, "off");
    EXPECT_EQ(report[0].samples, 3u);
    EXPECT_EQ(report[0].disagreed, 3u);
  }
}

}  // namespace
}  // namespace commhost::test
