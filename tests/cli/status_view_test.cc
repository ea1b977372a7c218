// SPDX-License-Identifier: Apache-2.0
// `commhost status`'s views (tools/cli/status): the summary line from the ranks' records,
// the events --watch prints once each, and the Prometheus text of `commhost run --metrics`.
#include <gtest/gtest.h>

#include "prometheus.h"
#include "status_view.h"
#include "top_view.h"

namespace commhost::cli {
namespace {

constexpr int64_t kNow = 1'000'000'000;

ProcessStatus rank(int r, uint64_t issued, double waiting = 0) {
  ProcessStatus p;
  p.rank = r;
  p.host = "h";
  p.pid = 100 + r;
  p.publishedUnixMs = kNow - 100;
  p.intervalMs = 1000;
  GroupStatus g;
  g.name = "main";
  g.rank = r;
  g.worldSize = 4;
  g.globalRanks = {0, 1, 2, 3};
  g.lastIssuedSeq = issued;
  g.lastIssuedOp = "allreduce";
  g.lastCompletedSeq = issued - (waiting > 0 ? 1 : 0);
  if (waiting > 0) {
    g.inFlight = 1;
    g.oldest = OpInFlight{"allreduce", issued, "gloo", waiting};
  }
  p.groups.push_back(g);
  return p;
}

ViewOptions at(int expected = 4) {
  ViewOptions o;
  o.nowUnixMs = kNow;
  o.expectedRanks = expected;
  return o;
}

TEST(StatusView, EveryRankOk) {
  std::vector<ProcessStatus> ranks = {rank(0, 1041), rank(1, 1041), rank(2, 1041), rank(3, 1041)};
  EXPECT_EQ(summaryLine(ranks, at()), "4 ranks ok (group main generation 0, allreduce seq 1041)");
}

TEST(StatusView, ARankBehindIsNamedWithTheOpAndSeqTheOthersWaitIn) {
  std::vector<ProcessStatus> ranks = {rank(0, 1041, 12), rank(1, 1041, 12), rank(2, 1038), rank(3, 1041, 11)};
  EXPECT_EQ(summaryLine(ranks, at()),
            "rank 2 behind by 3 ops in allreduce seq 1041 for 12 s (ranks 0, 1 and 3 wait; it last issued allreduce "
            "seq 1038)");
  // Ordinary skew (the others waited less than behindAfterSeconds) is not a problem.
  ranks = {rank(0, 1041, 0.5), rank(1, 1041, 0.5), rank(2, 1040), rank(3, 1041, 0.5)};
  EXPECT_EQ(summaryLine(ranks, at()).substr(0, 10), "4 ranks ok");
}

TEST(StatusView, SilentMissingAndLostRanksAreNamed) {
  std::vector<ProcessStatus> ranks = {rank(0, 5), rank(1, 5), rank(2, 5)};
  ranks[1].publishedUnixMs = kNow - 9000;
  ranks[0].groups[0].lostPeers[2] = "no heartbeat for 10 s";
  EXPECT_EQ(summaryLine(ranks, at()),
            "rank 3 has published no status; rank 1 silent for 9.0 s (h pid 101); rank 2 lost (said by rank 0: no "
            "heartbeat for 10 s)");
}

TEST(StatusView, WatchPrintsEachEventOnceAndARestartedRanksAnew) {
  std::vector<ProcessStatus> ranks = {rank(0, 1)};
  ranks[0].events = {{1, kNow, "swap_started", "main", "a"}, {2, kNow, "swap_committed", "main", "b"}};
  std::map<std::string, uint64_t> seen;
  ASSERT_EQ(newEvents(ranks, seen).size(), 2u);
  EXPECT_TRUE(newEvents(ranks, seen).empty());
  ranks[0].events.push_back({3, kNow + 1, "peer_lost", "main", "c"});
  const auto lines = newEvents(ranks, seen);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("rank 0 peer_lost: c"), std::string::npos) << lines[0];
  ranks[0].pid = 999;  // restarted: its ids start at 1 again
  ranks[0].events = {{1, kNow + 2, "membership", "main", "d"}};
  EXPECT_EQ(newEvents(ranks, seen).size(), 1u);
}

TEST(Prometheus, HistogramsAreCumulativeAndLabelsEscaped) {
  ProcessStatus p = rank(0, 3);
  p.latencyBucketsUs = {10, 100};
  // 5 completed, of which 3 were timed (a sample of the small ops): the histogram counts 3.
  p.ops.push_back({"we\"ird\\group", "allreduce", "gloo", "le1KiB", 5, 1, 40, 3, 150, {1, 1, 1}});
  const std::string text = prometheusText({p}, kNow);
  const std::string labels = R"(group="we\"ird\\group",rank="0",op="allreduce",backend="gloo",size_class="le1KiB")";
  EXPECT_NE(text.find("commhost_ops_total{" + labels + "} 5\n"), std::string::npos) << text;
  EXPECT_NE(text.find("commhost_op_latency_seconds_bucket{" + labels + ",le=\"1.0000000000000001e-05\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("commhost_op_latency_seconds_bucket{" + labels + ",le=\"+Inf\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("commhost_op_latency_seconds_count{" + labels + "} 3\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE commhost_op_latency_seconds histogram\n"), std::string::npos);
  EXPECT_NE(text.find("commhost_group_last_issued_seq{group=\"main\",rank=\"0\"} 3\n"), std::string::npos);
}

TEST(Prometheus, StoreRequestsAndFailuresPerRankAndOp) {
  ProcessStatus p = rank(2, 3);
  p.storeRequests = {{"set", 40}, {"wait", 7}};
  p.storeFailures = {{"wait", 1}};
  const std::string text = prometheusText({p}, kNow);
  EXPECT_NE(text.find("# TYPE commhost_store_requests_total counter\n"), std::string::npos) << text;
  EXPECT_NE(text.find("commhost_store_requests_total{rank=\"2\",op=\"set\"} 40\n"), std::string::npos) << text;
  EXPECT_NE(text.find("commhost_store_requests_total{rank=\"2\",op=\"wait\"} 7\n"), std::string::npos) << text;
  EXPECT_NE(text.find("commhost_store_request_failures_total{rank=\"2\",op=\"wait\"} 1\n"), std::string::npos) << text;
}

TEST(Top, QuantilesAreReadWithinTheirBucket) {
  const std::vector<int64_t> bounds = {10, 20, 50};
  EXPECT_EQ(quantileUs({0, 0, 0, 0}, bounds, 0.5), -1);
  EXPECT_DOUBLE_EQ(quantileUs({0, 4, 0, 0}, bounds, 0.5), 15);  // half of (10, 20]
  EXPECT_DOUBLE_EQ(quantileUs({98, 0, 2, 0}, bounds, 0.99), 35);
  EXPECT_DOUBLE_EQ(quantileUs({0, 0, 0, 3}, bounds, 0.5), 50);  // +Inf: its lower bound
}

TEST(Top, RatesAreOfTheOpsCompletedBetweenTwoReadings) {
  ProcessStatus before = rank(0, 10);
  before.latencyBucketsUs = {10, 20, 50};
  before.ops.push_back({"main", "allreduce", "gloo", "le64KiB", 100, 0, 100 * 4096, 100, 0, {0, 100, 0, 0}});
  ProcessStatus now = before;
  now.ops[0].completed = 300;
  now.ops[0].bytes = 300 * 4096;
  now.ops[0].buckets = {0, 100, 200, 0};
  TopFrame f = topFrame({before}, {now}, 2.0, kNow);
  ASSERT_EQ(f.ranks.size(), 1u);
  EXPECT_DOUBLE_EQ(f.ranks[0].opsPerSecond, 100);
  EXPECT_DOUBLE_EQ(f.ranks[0].bytesPerSecond, 100 * 4096);
  EXPECT_DOUBLE_EQ(f.ranks[0].busBytesPerSecond, 100 * 4096 * 1.5);  // allreduce at 4 ranks: 2 * 3 / 4
  EXPECT_DOUBLE_EQ(f.ranks[0].p50Us, 35);                            // all 200 new ones in (20, 50]
  ASSERT_EQ(f.ops.size(), 1u);
  EXPECT_EQ(f.ops[0].key, "main allreduce gloo");
  // A restarted rank (another pid) counts from its own start.
  now.pid = 4242;
  f = topFrame({before}, {now}, 2.0, kNow);
  EXPECT_DOUBLE_EQ(f.ranks[0].opsPerSecond, 150);
  EXPECT_NE(renderTop(f, "1 rank ok").find("rank 0"), std::string::npos);
}

}  // namespace
}  // namespace commhost::cli
