// SPDX-License-Identifier: Apache-2.0
// The job status (commhost/job_status.h): the op statistics that follow the flight
// recorder, records published by real groups (gloo ranks as threads over a HashStore) and
// read back, and records of another version refused by name.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "commhost/commhost.h"
#include "commhost/job_status.h"
#include "store/counting_store.h"
#include "supervisor/op_stats.h"
#include "test_util.h"

namespace commhost {
namespace {

using namespace test;
using supervisor::FlightRecorder;
using supervisor::OpRecord;
using supervisor::OpState;

OpRecord op(int64_t bytes, OpState state, int64_t latencyUs) {
  OpRecord r;
  supervisor::copyName(r.group, sizeof r.group, "main");
  supervisor::copyName(r.backend, sizeof r.backend, "gloo");
  r.bytes = bytes;
  r.state = state;
  r.scheduledUs = 1000;
  r.endedUs = state == OpState::Started ? 0 : 1000 + latencyUs;
  return r;
}

TEST(OpStats, CountsFinishedOpsPerSizeClassAndLatencyBucket) {
  FlightRecorder fr(8);
  supervisor::OpStatsCollector c;
  fr.add(op(8, OpState::Completed, 5));       // le1KiB, bucket <= 5 us
  fr.add(op(4096, OpState::Completed, 700));  // le64KiB, bucket <= 1 ms
  fr.add(op(4096, OpState::Failed, 0));       // counted as failed only
  const uint64_t running = fr.add(op(8, OpState::Started, 0));
  c.poll(fr);
  ASSERT_EQ(c.stats().cells().size(), 2u);
  const auto& small = c.stats().cells().begin()->second;
  EXPECT_EQ(small.completed, 1u);
  EXPECT_EQ(small.buckets[2], 1u);
  const auto& mid = std::next(c.stats().cells().begin())->second;
  EXPECT_EQ(mid.completed, 1u);
  EXPECT_EQ(mid.failed, 1u);
  EXPECT_EQ(mid.bytes, 4096u);
  EXPECT_EQ(mid.buckets[9], 1u);  // 500 < 700 <= 1000 us
  // The running op counts once it ends, not before and not twice.
  fr.finish(running, OpState::Completed, 1020, "");
  c.poll(fr);
  c.poll(fr);
  EXPECT_EQ(c.stats().cells().begin()->second.completed, 2u);
  EXPECT_EQ(c.stats().missed(), 0u);
}

TEST(OpStats, OpsThatLeftTheRingUnreadAreCountedAsMissed) {
  FlightRecorder fr(8);
  supervisor::OpStatsCollector c;
  for (int i = 0; i < 20; ++i) fr.add(op(8, OpState::Completed, 5));
  c.poll(fr);
  EXPECT_EQ(c.stats().missed(), 12u);
  EXPECT_EQ(c.stats().cells().begin()->second.completed, 8u);
}

TEST(JobStatus, GroupsPublishTheirRecordAndItReadsBack) {
  const std::string yaml =
      "group: { timeout: 20s }\n"
      "backends: { gloo: { options: { threads: 1 } } }\n"
      "routes: [{ device: cpu, backend: gloo }]\n"
      "supervisor: { heartbeat: { interval: 50ms, timeout: 5s }, flight_recorder: { entries: 64 } }\n";
  auto registry = testRegistry();
  auto config = configFrom(yaml, *registry);
  auto store = std::make_shared<HashStore>(std::chrono::seconds(20));
  std::vector<std::shared_ptr<ProcessGroup>> groups(2);
  runRanks(2, [&](int r) {
    groups[r] = ProcessGroup::create({config, registry, store, r, 2});
    for (int i = 0; i < 10; ++i) checkedAllreduce(*groups[r], i);
  });
  // Both groups live in this process: one record (the first group's rank) with both.
  std::vector<ProcessStatus> statuses;
  for (int i = 0; i < 200; ++i) {
    statuses = readJobStatus(*store, nullptr);
    uint64_t counted = 0;
    if (statuses.size() == 1)
      for (const auto& s : statuses[0].ops) counted += s.completed;
    if (counted == 20) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ASSERT_EQ(statuses.size(), 1u);
  const ProcessStatus& p = statuses[0];
  EXPECT_EQ(p.version, kJobStatusVersion);
  EXPECT_EQ(p.pid, static_cast<int>(::getpid()));
  EXPECT_EQ(p.intervalMs, 50);
  ASSERT_EQ(p.groups.size(), 2u);
  for (const auto& g : p.groups) {
    EXPECT_EQ(g.name, "main");
    EXPECT_EQ(g.worldSize, 2);
    EXPECT_EQ(g.lastIssuedSeq, 10u);
    EXPECT_EQ(g.lastCompletedSeq, 10u);
    EXPECT_EQ(g.inFlight, 0);
    EXPECT_EQ(g.backends, std::vector<std::string>{"gloo"});
    EXPECT_FALSE(g.routes.empty());
    EXPECT_FALSE(g.configHash.empty());
  }
  ASSERT_EQ(p.ops.size(), 1u);
  EXPECT_EQ(p.ops[0].op, "allreduce");
  EXPECT_EQ(p.ops[0].backend, "gloo");
  EXPECT_EQ(p.ops[0].sizeClass, "le1KiB");
  EXPECT_EQ(p.ops[0].completed, 20u);
  EXPECT_EQ(p.ops[0].bytes, 20u * 256);
  // The two groups' calls to the job's store: each rank counted its generation (add), the
  // config check (set, get), the world key (compare_set) and the records themselves (set).
  EXPECT_GE(p.storeRequests.at("add"), 2u);
  EXPECT_GE(p.storeRequests.at("set"), 3u);
  EXPECT_GE(p.storeRequests.at("compare_set"), 1u);
  EXPECT_TRUE(p.storeFailures.empty());
  // What --json prints parses back to the same records.
  EXPECT_NE(jobStatusJson(statuses).find("\"last_completed_seq\": 10"), std::string::npos);
  EXPECT_NE(jobStatusJson(statuses).find("\"store_requests\": {"), std::string::npos);
}

TEST(CountingStore, CountsEachCallAndEachFailureByOp) {
  auto base = std::make_shared<HashStore>(std::chrono::milliseconds(50));
  CountingStore store(base);
  store.set("a", toBytes("1"));
  EXPECT_EQ(toString(store.get("a")), "1");
  EXPECT_EQ(store.add("n", 2), 2);
  EXPECT_EQ(store.add("n", 3), 5);
  EXPECT_THROW(store.wait({"missing"}, std::chrono::milliseconds(10)), TimeoutError);
  EXPECT_THROW(store.get("missing"), TimeoutError);  // the base store's timeout
  EXPECT_TRUE(store.check({"a"}));
  const auto calls = store.counts()->snapshot(false);
  const auto failed = store.counts()->snapshot(true);
  EXPECT_EQ(calls, (std::map<std::string, uint64_t>{{"add", 2}, {"check", 1}, {"get", 2}, {"set", 1}, {"wait", 1}}));
  EXPECT_EQ(failed, (std::map<std::string, uint64_t>{{"get", 1}, {"wait", 1}}));
  EXPECT_EQ(store.timeout(), base->timeout());  // a wrapper starts with its base's timeout
}

TEST(JobStatus, ARecordOfAnotherVersionOrNotJsonIsNamedNotRead) {
  HashStore store;
  store.set("commhost/status/world", toBytes("3"));
  store.set("commhost/status/0", toBytes(R"({"version": 2, "rank": 0})"));
  store.set("commhost/status/1", toBytes("garbage"));
  std::vector<std::string> problems;
  EXPECT_TRUE(readJobStatus(store, &problems).empty());
  ASSERT_EQ(problems.size(), 3u);
  EXPECT_NE(problems[0].find("rank 2 has published no status"), std::string::npos) << problems[0];
  EXPECT_NE(problems[1].find("rank 0's status (key commhost/status/0) has version 2; this commhost reads version 1"),
            std::string::npos)
      << problems[1];
  EXPECT_NE(problems[2].find("rank 1's status (key commhost/status/1) is not a status record"), std::string::npos)
      << problems[2];
}

}  // namespace
}  // namespace commhost
