// SPDX-License-Identifier: Apache-2.0
// Tuner plugins (commhost/sdk/tuner.h): the config's `tuner:` reorders a route's backends
// per size class when a group builds its route table. The tuner is the real test plugin
// prefertuner (tests/test_plugins/prefer_tuner.cc), loaded from its own folder.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "commhost/dispatcher.h"
#include "commhost/process_group.h"
#include "commhost/sdk/measured_table.h"
#include "commhost/store.h"
#include "test_util.h"

namespace commhost::test {
namespace {

// gloo and storecoll (whose manifest has every op, dtype and reduce op) in one route, the
// tuner preferring `prefer` from `from` bytes on.
std::string tunedConfig(const std::string& tunerOptions, const std::string& routes = "[gloo, ref]") {
  return "plugin_path: [" + pluginDir("tuner") +
         "]\n"
         "group: { timeout: 20s }\n"
         "backends: { gloo: { options: { threads: 1, contexts: 1 } }, ref: { plugin: storecoll } }\n"
         "routes: [{ device: cpu, backend: " +
         routes + " }]\ntuner: { plugin: prefertuner, options: { " + tunerOptions + " } }\n";
}

int indexOf(const RouteTable& t, const std::string& name) {
  const auto& names = t.backendNames();
  return static_cast<int>(std::find(names.begin(), names.end(), name) - names.begin());
}

TEST(Tuner, ReordersARoutesBackendsFromTheSizeClassItNamesAndOnlyInTheGroupsTable) {
  auto registry = testRegistry();
  auto config = configFrom(tunedConfig("prefer: ref, from_bytes: 64KiB"), *registry);
  const RouteTable tuned = RouteTable::forGroup(*config, *registry, {"main", 0, 2, 2});
  const int gloo = indexOf(tuned, "gloo"), ref = indexOf(tuned, "ref");
  const auto at = [&](const RouteTable& t, int64_t bytes) {
    return t.route(OpType::Allreduce, DeviceType::CPU, bytes, DType::Float32, ReduceOp::Sum);
  };
  EXPECT_EQ(at(tuned, 0), gloo);
  EXPECT_EQ(at(tuned, 65535), gloo);
  EXPECT_EQ(at(tuned, 65536), ref);
  EXPECT_EQ(at(tuned, int64_t{1} << 40), ref);
  // The classes alike merge: two segments, not one per power of two.
  const auto& segments = tuned.segments(OpType::Allreduce, DeviceType::CPU, DType::Float32, ReduceOp::Sum);
  ASSERT_EQ(segments.size(), 2u);
  EXPECT_FALSE(segments[0].tuned);
  EXPECT_TRUE(segments[1].tuned);
  EXPECT_EQ(segments[1].minBytes, 65536);
  EXPECT_EQ(segments[1].maxBytes, INT64_MAX);
  const std::string text = tuned.describe();
  EXPECT_NE(text.find("cpu allreduce 65536+ bytes -> ref"), std::string::npos) << text;
  EXPECT_NE(text.find("chosen by the tuner:"), std::string::npos) << text;
  EXPECT_NE(text.find("tuner 'prefertuner' put ref first of [gloo, ref]"), std::string::npos) << text;
  // forConfig (config check, no group) keeps the config's order.
  const RouteTable plain = RouteTable::forConfig(*config, *registry);
  EXPECT_EQ(at(plain, int64_t{1} << 20), gloo);
  EXPECT_NE(plain.fingerprint(), tuned.fingerprint());
  EXPECT_EQ(tuned.fingerprint(), RouteTable::forGroup(*config, *registry, {"main", 1, 2, 2}).fingerprint());
}

TEST(Tuner, IsAskedOnlyWhereARouteListsTwoBackendsThatServeTheCell) {
  const std::string counts = testDumpDir() + ".count";
  std::filesystem::create_directories(std::filesystem::path(counts).parent_path());
  auto registry = testRegistry();
  const auto asked = [&](const std::string& routes) {
    std::remove(counts.c_str());
    auto config = configFrom(tunedConfig("prefer: ref, count_file: " + counts, routes), *registry);
    RouteTable::forGroup(*config, *registry, {"main", 0, 2, 2});
    std::ifstream in(counts);
    int n = -1;
    in >> n;
    return n;
  };
  EXPECT_EQ(asked("gloo"), 0) << "one backend: nothing to choose";
  const int both = asked("[gloo, ref]");
  EXPECT_GT(both, 0);
  // allreduce alone on two backends asks a fraction of what every op does.
  const int one = asked("gloo }, { device: cpu, op: allreduce, backend: [gloo, ref]");
  EXPECT_GT(one, 0);
  EXPECT_LT(one, both);
}

TEST(Tuner, AnAnswerThatIsNotAReorderingFailsTheBuildNamingTheTuner) {
  auto registry = testRegistry();
  auto config = configFrom(tunedConfig("drop: true"), *registry);
  EXPECT_THROW_WITH(RouteTable::forGroup(*config, *registry, {"main", 0, 2, 2}), PluginError,
                    "tuner 'prefertuner' answered [gloo]",
                    "not a reordering of the candidates it was given, [gloo, ref]", "remove `tuner:`");
}

TEST(Tuner, TheConfigNamesATunerPluginValidatesItsOptionsAndHashesThem) {
  auto registry = testRegistry();
  auto a = configFrom(tunedConfig("prefer: ref"), *registry);
  auto b = configFrom(tunedConfig("prefer: gloo"), *registry);
  ASSERT_TRUE(a->tuner.has_value());
  EXPECT_EQ(a->tuner->plugin, "prefertuner");
  EXPECT_NE(a->effectiveYaml.find("tuner:"), std::string::npos) << a->effectiveYaml;
  EXPECT_NE(a->hash, b->hash) << "the ranks must agree on the tuner's options";
  EXPECT_FALSE(configFrom(kStoreCollConfig, *registry)->tuner.has_value());
  EXPECT_THROW_WITH(configFrom(tunedConfig("prefer: ref, colour: red"), *registry), ConfigError, "tuner.options",
                    "colour");
  const std::string wrongKind = "backends: { gloo: {} }\nroutes: [{ device: cpu, backend: gloo }]\ntuner: gloo\n";
  EXPECT_THROW_WITH(configFrom(wrongKind, *registry), ConfigError,
                    "plugin 'gloo' is a backend plugin, not a tuner plugin");
  const std::string missing = "backends: { gloo: {} }\nroutes: [{ device: cpu, backend: gloo }]\ntuner: nosuch\n";
  EXPECT_THROW_WITH(configFrom(missing, *registry), ConfigError, "tuner plugin 'nosuch' not found");
}

// The tuned table is the one the dispatcher uses: offbyone (storecoll adding 1) serves the
// sizes the tuner gives it, so the sum tells which backend ran.
TEST(Tuner, TheGroupRoutesCallsByTheTunedTable) {
  const std::string yaml = "plugin_path: [" + pluginDir("tuner") +
                           "]\n"
                           "group: { timeout: 20s }\n"
                           "backends: { gloo: { options: { threads: 1, contexts: 1 } }, off: { plugin: offbyone } }\n"
                           "routes: [{ device: cpu, backend: [gloo, off] }]\n"
                           "tuner: { plugin: prefertuner, options: { prefer: off, from_bytes: 4KiB } }\n";
  auto groups = makeGroups(yaml, 2);
  runRanks(2, [&](int r) {
    for (int64_t n : {16, 4096}) {  // 64 B on gloo; 16 KiB on off
      Tensor t = Tensor::empty({n}, DType::Float32);
      for (int64_t i = 0; i < n; ++i) t.data_as<float>()[i] = static_cast<float>(r + 1);
      groups[r]->allreduce(t)->wait();
      const float want = n == 16 ? 3.0f : 4.0f;
      ASSERT_EQ(t.data_as<float>()[0], want) << "rank " << r << ", " << n * 4 << " bytes";
    }
  });
}

TEST(Tuner, RanksWhoseTunersAnswerDifferentlyAreAllRefusedNamingEachFingerprint) {
  auto registry = testRegistry();
  auto config = configFrom(tunedConfig("per_rank: true"), *registry);
  auto store = std::make_shared<HashStore>(std::chrono::seconds(20));
  std::vector<std::string> errors(2);
  runRanks(2, [&](int r) {
    try {
      ProcessGroup::create({config, registry, store, r, 2});
    } catch (const ConfigError& e) {
      errors[r] = e.what();
    }
  });
  // Every rank refuses (none goes on to wait for the other in a backend's rendezvous).
  for (const std::string& e : errors) {
    EXPECT_NE(e.find("tuner 'prefertuner' answered the ranks differently"), std::string::npos) << e;
    EXPECT_NE(e.find("rank(s) 0 built"), std::string::npos) << e;
    EXPECT_NE(e.find("rank(s) 1 built"), std::string::npos) << e;
    EXPECT_NE(e.find("a tuner must answer from what every rank shares"), std::string::npos) << e;
  }
}

TEST(Tuner, ARankWhoseTunerFailsIsNamedWithItsReasonByTheOthers) {
  auto registry = testRegistry();
  auto config = configFrom(tunedConfig("fail_rank: 1"), *registry);
  auto store = std::make_shared<HashStore>(std::chrono::seconds(20));
  std::vector<std::string> errors(2);
  const auto start = std::chrono::steady_clock::now();
  runRanks(2, [&](int r) {
    try {
      ProcessGroup::create({config, registry, store, r, 2});
    } catch (const Error& e) {
      errors[r] = e.what();
    }
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10)) << "nobody waited for the timeout";
  EXPECT_NE(errors[1].find("tuner plugin 'prefertuner' (configured at test.yaml:"), std::string::npos) << errors[1];
  EXPECT_NE(errors[1].find("failed to start: prefertuner fails on rank 1"), std::string::npos) << errors[1];
  EXPECT_NE(errors[0].find("rank 1 could not build its route table: tuner plugin 'prefertuner'"), std::string::npos)
      << errors[0];
}

// A shrink's round builds the survivors' tables anew: a tuner answering them differently
// (here: only in groups of fewer than 3) fails the round on every survivor.
TEST(Tuner, AMembershipRoundWhoseTablesDifferFailsOnEverySurvivor) {
  auto groups = makeGroups(tunedConfig("per_rank_below: 3"), 3);
  runRanks(3, [&](int r) {
    ProcessGroup& pg = *groups[r];
    checkedAllreduce(pg, 0);
    if (r == 2) return;  // gone: the others shrink without it
    EXPECT_THROW_WITH(pg.shrink(shrinkWithin(std::chrono::seconds(3))), ConfigError,
                      "tuner 'prefertuner' answered the ranks differently", "rank(s) 0 built", "rank(s) 1 built",
                      "a tuner must answer from what every rank shares");
  });
}

// The same with a tuner that answers alike: the survivors agree on the table and go on.
TEST(Tuner, AMembershipRoundBuildsTheSurvivorsTunedTable) {
  auto groups = makeGroups(tunedConfig("prefer: ref, from_bytes: 4KiB"), 3);
  runRanks(3, [&](int r) {
    ProcessGroup& pg = *groups[r];
    checkedAllreduce(pg, 0);
    if (r == 2) return;
    const ShrinkReport report = pg.shrink(shrinkWithin(std::chrono::seconds(3)));
    EXPECT_EQ(report.worldSize, 2);
    checkedAllreduce(pg, 1);
    const int ref = indexOf(pg.routes(), "ref");
    EXPECT_EQ(pg.routes().route(OpType::Allreduce, DeviceType::CPU, 1 << 20, DType::Float32, ReduceOp::Sum), ref);
  });
}

// A hot swap votes on the new table: one a tuner answered differently is refused on every
// rank, and the group goes on with the routes it had.
TEST(Tuner, AHotSwapToATunerThatAnswersRanksDifferentlyIsRefusedAndTheGroupGoesOn) {
  auto groups = makeGroups(tunedConfig("prefer: ref"), 2);
  auto registry = testRegistry();
  auto bad = configFrom(tunedConfig("per_rank: true"), *registry);
  runRanks(2, [&](int r) {
    EXPECT_THROW_WITH(groups[r]->reconfigure(bad), ConfigError, "tuner 'prefertuner' answered the ranks differently",
                      "remove `tuner:` and call reconfigure() again");
    checkedAllreduce(*groups[r], 0);
  });
}

// gloo fast at small sizes, ref (storecoll) at large ones; off measured wrong everywhere.
MeasuredTable sampleTable(int world = 2) {
  MeasuredTable t;
  t.worldSize = world;
  MeasuredTable::Op op;
  op.op = OpType::Allreduce;
  op.rows.push_back({8, {{"gloo", 10, true}, {"ref", 50, true}, {"off", 1, false}}});
  op.rows.push_back({4096, {{"gloo", 20, true}, {"ref", 40, true}, {"off", 1, false}}});
  op.rows.push_back({1 << 20, {{"gloo", 900, true}, {"ref", 300, true}, {"off", 1, false}}});
  t.ops.push_back(op);
  return t;
}

TEST(MeasuredTable, RoundTripsThroughItsJsonAndRefusesAnotherVersion) {
  const MeasuredTable t = sampleTable();
  const MeasuredTable back = parseMeasuredTable(t.toJson(), "t.json");
  ASSERT_EQ(back.ops.size(), 1u);
  ASSERT_EQ(back.ops[0].rows.size(), 3u);
  EXPECT_EQ(back.ops[0].rows[2].bytes, 1 << 20);
  EXPECT_EQ(back.ops[0].rows[2].cells[1].backend, "ref");
  EXPECT_EQ(back.ops[0].rows[2].cells[1].medianUs, 300);
  EXPECT_FALSE(back.ops[0].rows[0].cells[2].right);
  EXPECT_EQ(back.worldSize, 2);
  std::string v2 = t.toJson();
  v2.replace(v2.find("\"version\": 1"), 12, "\"version\": 2");
  EXPECT_THROW_WITH(parseMeasuredTable(v2, "t.json"), ConfigError, "measured table t.json: version 2",
                    "reads version 1 only", "commhost tune --table FILE");
  EXPECT_THROW_WITH(parseMeasuredTable("{\"a\": 1}", "x.json"), ConfigError, "not a measured table");
  EXPECT_THROW_WITH(parseMeasuredTable("nope", "x.json"), ConfigError, "not JSON");
}

TEST(MeasuredTable, FastestSumsTheRowsOfAClassOrTakesTheNearestAndNeverAWrongOne) {
  const MeasuredTable t = sampleTable();
  const std::vector<std::string> all = {"gloo", "ref", "off"};
  EXPECT_EQ(t.fastest(OpType::Allreduce, 8, 15, all), "gloo") << "off is faster but was wrong";
  EXPECT_EQ(t.fastest(OpType::Allreduce, 0, 1, all), "gloo") << "below every row: the nearest above";
  EXPECT_EQ(t.fastest(OpType::Allreduce, 1 << 20, (2 << 20) - 1, all), "ref");
  EXPECT_EQ(t.fastest(OpType::Allreduce, int64_t{1} << 30, INT64_MAX, all), "ref") << "above: the nearest below";
  EXPECT_EQ(t.fastest(OpType::Allreduce, 0, INT64_MAX, all), "ref") << "all rows summed: 960 against 1250";
  EXPECT_EQ(t.fastest(OpType::Broadcast, 8, 15, all), "") << "an op it did not measure";
  EXPECT_EQ(t.fastest(OpType::Allreduce, 8, 15, {"shm"}), "") << "a backend it did not measure";
  EXPECT_LT(t.timeOf(OpType::Allreduce, 8, 15, "off"), 0);
}

// The built-in tuner plugin `measured`, reading a table file as the config names it.
std::string measuredConfig(const std::string& table, const std::string& extra = "") {
  return "group: { timeout: 20s }\n"
         "backends: { gloo: { options: { threads: 1, contexts: 1 } }, ref: { plugin: storecoll },"
         " off: { plugin: offbyone } }\n"
         "routes: [{ device: cpu, backend: [gloo, off, ref] }]\n"
         "tuner: { plugin: measured, options: { table: " +
         table + extra + " } }\n";
}

TEST(MeasuredTuner, PutsTheFastestRightBackendFirstPerSizeAtTheWorldSizeItMeasured) {
  const std::string path = testDumpDir() + ".json";
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << sampleTable().toJson();
  auto registry = testRegistry();
  auto config = configFrom(measuredConfig(path), *registry);
  const RouteTable t = RouteTable::forGroup(*config, *registry, {"main", 0, 2, 2});
  const auto at = [&](const RouteTable& table, int64_t bytes, DType dtype = DType::Float32) {
    return table.backendNames()[table.route(OpType::Allreduce, DeviceType::CPU, bytes, dtype, ReduceOp::Sum)];
  };
  EXPECT_EQ(at(t, 8), "gloo");
  EXPECT_EQ(at(t, 4096), "gloo");
  EXPECT_EQ(at(t, 1 << 20), "ref");
  EXPECT_EQ(at(t, int64_t{1} << 32), "ref");
  EXPECT_EQ(at(t, 1 << 20, DType::Float64), "gloo") << "f64 was not measured: the config's order";
  // Measured at 2 ranks: a group of 4 keeps the config's order.
  EXPECT_EQ(at(RouteTable::forGroup(*config, *registry, {"main", 0, 4, 4}), 1 << 20), "gloo");
  // ref's 300 us against gloo's 900 us is a 67% gain: under a min_gain of 0.7 nothing moves.
  auto strict = configFrom(measuredConfig(path, ", min_gain: 0.7"), *registry);
  EXPECT_EQ(at(RouteTable::forGroup(*strict, *registry, {"main", 0, 2, 2}), 1 << 20), "gloo");
}

TEST(MeasuredTuner, ATableThatCannotBeReadIsAConfigErrorWhereTheConfigIsLoaded) {
  auto registry = testRegistry();
  EXPECT_THROW_WITH(configFrom(measuredConfig("/nonexistent/m.json"), *registry), ConfigError, "tuner.options",
                    "cannot read measured table '/nonexistent/m.json'");
  EXPECT_THROW_WITH(configFrom("backends: { gloo: {} }\nroutes: [{ device: cpu, backend: gloo }]\n"
                               "tuner: measured\n",
                               *registry),
                    ConfigError, "option 'table'", "is required");
}

}  // namespace
}  // namespace commhost::test
