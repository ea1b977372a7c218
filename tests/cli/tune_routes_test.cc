// SPDX-License-Identifier: Apache-2.0
// commhost tune's decisions (tools/cli/tune/tuned_routes.h): the winner of a size, the
// merged ranges, and the configs it writes, loaded back and resolved by the real route
// table (the plugins are the ones built beside these tests).
#include <gtest/gtest.h>

#include "commhost/config.h"
#include "commhost/dispatcher.h"
#include "commhost/registry.h"
#include "tuned_routes.h"

namespace commhost::cli {
namespace {

CandidateTimes times(const std::string& backend, std::vector<double> us, int64_t wrong = 0) {
  return {backend, std::move(us), wrong};
}

SizeTimes size(int64_t bytes, double gloo, double shm, double off) {
  return {bytes, {times("gloo", {gloo, gloo}), times("shm", {shm, shm}), times("off", {off, off}, 3)}};
}

TEST(TuneRoutes, TheFastestRightCandidateWinsByItsMedianRound) {
  // off is the fastest and wrong: never chosen.
  SizeTimes s{64, {times("gloo", {30, 31, 90}), times("shm", {20, 40, 41}), times("off", {1, 1, 1}, 1)}};
  EXPECT_EQ(winner(s), 0) << "gloo's median 31 beats shm's 40, whatever shm's best round";
  EXPECT_DOUBLE_EQ(medianUs(s.candidates[1]), 40);
  SizeTimes none{8, {times("off", {1}, 2), times("gloo", {})}};
  EXPECT_EQ(winner(none), -1) << "wrong, or never measured";
}

TEST(TuneRoutes, RangesMergeWhereTheWinnerHoldsAndCoverEverySize) {
  OpTimes op{"allreduce", {OpType::Allreduce}, {}, {}};
  op.sizes = {size(8, 30, 2, 1), size(1024, 30, 3, 1), size(65536, 40, 20, 1), size(1 << 20, 300, 900, 1),
              size(4 << 20, 900, 3000, 1)};
  const auto ranges = tunedRanges(op);
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[0].backend, "shm");
  EXPECT_EQ(ranges[0].minBytes, 0);
  EXPECT_EQ(ranges[0].maxBytes, 65536);
  EXPECT_EQ(ranges[1].backend, "gloo");
  EXPECT_EQ(ranges[1].minBytes, 65537);
  EXPECT_EQ(ranges[1].maxBytes, INT64_MAX) << "the last range has no upper bound";
  op.sizes[2].candidates[0].wrong = op.sizes[2].candidates[1].wrong = 1;  // nobody right at 64 KiB
  const auto around = tunedRanges(op);
  ASSERT_EQ(around.size(), 2u);
  EXPECT_EQ(around[0].maxBytes, 1024) << "a size without a winner goes to the ranges around it";
  EXPECT_EQ(around[1].minBytes, 1025);
}

// What a written config routes `bytes` of allreduce on cpu to.
std::string routedTo(const std::string& text, int64_t bytes, OpType op = OpType::Allreduce,
                     DType dtype = DType::Float32) {
  PluginRegistry registry;
  const Config config = loadConfigText(text, "tuned", registry);
  const RouteTable table = RouteTable::forConfig(config, registry);
  const int b = table.route(op, DeviceType::CPU, bytes, dtype, ReduceOp::Kind::Sum);
  return b < 0 ? "unserved" : table.backendNames()[b];
}

const char* kOriginal =
    "backends: { gloo: {}, shm: {} }\n"
    "routes:\n"
    "  - { device: cpu, backend: gloo }\n"
    "  - { device: cpu, op: allreduce, backend: gloo }\n"              // same keys: replaced
    "  - { device: cpu, op: allreduce, dtype: f64, backend: gloo }\n"  // narrower: kept
    "  - { device: cpu, op: broadcast, backend: shm }\n";

TEST(TuneRoutes, TheWrittenConfigRoutesEachRangeAndKeepsTheRest) {
  OpTimes op{"allreduce", {OpType::Allreduce}, {}, {}};
  op.sizes = {size(8, 30, 2, 1), size(65536, 40, 20, 1), size(1 << 20, 300, 900, 1)};
  const std::string text = tunedConfigText(kOriginal, "", DeviceType::CPU, {op}, {"tuned at 2 ranks"});
  EXPECT_EQ(text.rfind("# tuned at 2 ranks\n", 0), 0u) << text;
  EXPECT_NE(text.find("#         65536       40.0       20.0      wrong  -> shm"), std::string::npos) << text;
  EXPECT_EQ(routedTo(text, 8), "shm");
  EXPECT_EQ(routedTo(text, 65536), "shm");
  EXPECT_EQ(routedTo(text, 65537), "gloo");
  EXPECT_EQ(routedTo(text, int64_t{1} << 30), "gloo");
  EXPECT_EQ(routedTo(text, 8, OpType::Allreduce, DType::Float64), "gloo") << "the f64 route stays and wins";
  EXPECT_EQ(routedTo(text, 8, OpType::Broadcast), "shm") << "other ops keep their routes";
  EXPECT_EQ(routedTo(text, 8, OpType::Reduce), "gloo");
  EXPECT_EQ(text.find("backend: off"), std::string::npos) << "a wrong backend is never routed to";
}

TEST(TuneRoutes, EveryLineOfTheTableStaysAComment) {
  OpTimes op{
      "sendrecv", {OpType::Send, OpType::Recv}, {}, {"shm: config has 2 errors:\n  x:3:5: no send\n  x:4:5: no recv"}};
  op.sizes = {{8, {times("gloo", {3.0})}}};
  const std::string text = tunedConfigText(std::string(kOriginal) + "plugin_path: [ plugins ]\n", "/etc/job",
                                           DeviceType::CPU, {op}, {"two\nlines"});
  EXPECT_EQ(routedTo(text, 8, OpType::Send), "gloo") << text;
  EXPECT_NE(text.find("#  not measured: shm: config has 2 errors:\n#  x:3:5: no send\n"), std::string::npos) << text;
  EXPECT_EQ(text.rfind("# two\n# lines\n", 0), 0u) << text;
  EXPECT_NE(text.find("/etc/job/plugins"), std::string::npos) << "the written file works from anywhere";
}

TEST(TuneRoutes, ACandidateConfigListsEveryCandidateWithOneFirst) {
  const std::string text = candidateConfigText(std::string(kOriginal) + "plugin_path: [ plugins, /abs ]\n", "/etc/job",
                                               DeviceType::CPU, {OpType::Allreduce}, {"gloo", "shm"}, "shm");
  EXPECT_NE(text.find("{device: cpu, op: allreduce, backend: [shm, gloo]}"), std::string::npos) << text;
  EXPECT_NE(text.find("/etc/job/plugins"), std::string::npos) << "relative plugin folders made absolute";
  EXPECT_NE(text.find("/abs"), std::string::npos);
  const std::string loadable = candidateConfigText(kOriginal, "", DeviceType::CPU, {OpType::Allreduce}, {"gloo", "shm"},
                                                   "shm");
  EXPECT_EQ(routedTo(loadable, 1 << 20), "shm");
  const std::string other = candidateConfigText(kOriginal, "", DeviceType::CPU, {OpType::Allreduce}, {"gloo", "shm"},
                                                "gloo");
  EXPECT_EQ(routedTo(other, 1 << 20), "gloo");
  // The candidate runs where it is listed first: a tuner of the original would reorder it.
  const std::string tuned = candidateConfigText(std::string(kOriginal) + "tuner: { plugin: measured }\n", "",
                                                DeviceType::CPU, {OpType::Allreduce}, {"gloo", "shm"}, "shm");
  EXPECT_EQ(tuned.find("tuner"), std::string::npos) << tuned;
}

}  // namespace
}  // namespace commhost::cli
