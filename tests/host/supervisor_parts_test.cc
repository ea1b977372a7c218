// SPDX-License-Identifier: Apache-2.0
// The supervisor's parts on their own, without a Supervisor or its threads: the flight
// recorder's ring and the desync report read from progress published into a HashStore.
#include <thread>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "commhost/commhost.h"
#include "supervisor/desync.h"
#include "supervisor/flight_recorder.h"
#include "supervisor/group_monitor.h"
#include "supervisor/messages.h"

namespace commhost::supervisor {
namespace {

OpRecord record(uint64_t seq, const std::string& group = "main") {
  OpRecord r;
  copyName(r.group, sizeof(r.group), group);
  r.seq = seq;
  r.bytes = 16;
  return r;
}

TEST(FlightRecorder, KeepsTheLastEntriesOldestFirst) {
  FlightRecorder fr(4);
  EXPECT_EQ(fr.capacity(), 4u);
  for (uint64_t s = 1; s <= 10; ++s) fr.add(record(s));
  const auto snap = fr.snapshot();
  ASSERT_EQ(snap.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(snap[i].seq, 7 + i);
}

TEST(FlightRecorder, FinishUpdatesOnlyARecordStillHeld) {
  FlightRecorder fr(2);
  const uint64_t old = fr.add(record(1));
  const uint64_t kept = fr.add(record(2));
  fr.add(record(3));  // overwrites seq 1's slot
  fr.finish(old, OpState::Failed, 99, "too late");
  fr.finish(kept, OpState::Completed, 42, "");
  const auto snap = fr.snapshot();
  ASSERT_EQ(snap.size(), 2u);
  EXPECT_EQ(snap[0].seq, 2u);
  EXPECT_EQ(snap[0].state, OpState::Completed);
  EXPECT_EQ(snap[0].endedUs, 42);
  EXPECT_EQ(snap[1].seq, 3u);
  EXPECT_EQ(snap[1].state, OpState::Started);
}

TEST(FlightRecorder, NamesAreCutAtACharacterBoundary) {
  char buf[6];
  copyName(buf, sizeof buf, "ab\xc3\xa9\xc3\xa9");  // "abéé": 6 bytes, room for 5
  EXPECT_STREQ(buf, "ab\xc3\xa9");
  OpRecord r = record(5, std::string(100, 'g'));
  EXPECT_EQ(std::string(r.group).size(), sizeof(r.group) - 1);
  const DumpOp o = toDumpOp(r);
  EXPECT_EQ(o.group, std::string(99, 'g').substr(0, sizeof(r.group) - 1));
  EXPECT_EQ(o.seq, 5u);
  EXPECT_EQ(o.state, "started");
}

// A group of `world` ranks as rank 0 sees it, over a HashStore where the test publishes
// each rank's progress itself.
std::shared_ptr<GroupMonitor> group(int world) {
  auto g = std::make_shared<GroupMonitor>();
  g->name = "main";
  g->rank = 0;
  g->worldSize = world;
  g->store = std::make_shared<HashStore>();
  return g;
}

void progress(GroupMonitor& g, int rank, uint64_t issued, const std::string& op, uint64_t completed) {
  g.store->set(progressKey(rank), toBytes(wire::encode(wire::Progress{issued, op, completed})));
}

TEST(DesyncReport, NamesTheRanksThatNeverJoinedAndWhereTheyAre) {
  auto g = group(4);
  progress(*g, 0, 5, "allreduce", 4);
  progress(*g, 1, 5, "allreduce", 4);
  progress(*g, 2, 4, "broadcast", 4);
  progress(*g, 3, 4, "broadcast", 4);
  const std::string report = desyncReport(*g, 5, OpType::Allreduce);
  EXPECT_NE(report.find("Ranks 2 and 3 never joined allreduce seq 5: they last reported broadcast seq 4 (completed)"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("Ranks 0 and 1 are waiting in it"), std::string::npos) << report;
}

TEST(DesyncReport, RanksWithoutProgressOrWithGarbageAreUnknown) {
  auto g = group(3);
  progress(*g, 0, 2, "allreduce", 1);
  g->store->set(progressKey(1), toBytes("2 allreduce 1"));  // not the codec's: unknown, not rank 0's data
  const std::string report = desyncReport(*g, 2, OpType::Allreduce);
  EXPECT_NE(report.find("Ranks 1 and 2 published no progress"), std::string::npos) << report;
  EXPECT_NE(report.find("Rank 0 is waiting in it"), std::string::npos) << report;
}

TEST(DesyncReport, EveryRankInTheCollectiveBlamesTheBackend) {
  auto g = group(2);
  g->globalRanks = {4, 6};
  progress(*g, 0, 3, "allreduce", 2);
  progress(*g, 1, 3, "allreduce", 2);
  const std::string report = desyncReport(*g, 3, OpType::Allreduce);
  EXPECT_NE(report.find("Ranks 0 (global 4) and 1 (global 6) are waiting"), std::string::npos) << report;
  EXPECT_NE(report.find("the backend itself is stuck"), std::string::npos) << report;
}

// A rank whose heartbeat has not published since it issued the collective (its process
// not scheduled for a while) looks behind; the report waits for its fresh progress
// instead of naming it with the rank truly behind.
TEST(DesyncReport, WaitsForALateRanksProgressBeforeNamingIt) {
  auto g = group(4);
  progress(*g, 0, 10, "allreduce", 9);
  progress(*g, 1, 9, "allreduce", 9);  // stale: it issued seq 10, and publishes that late
  progress(*g, 2, 9, "allreduce", 9);  // truly behind, and it answered the incident
  progress(*g, 3, 10, "allreduce", 9);
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    progress(*g, 1, 10, "allreduce", 9);
  });
  int rounds = 0;
  const auto start = std::chrono::steady_clock::now();
  awaitLateProgress(*g, 10, {1, 2, 3}, std::chrono::seconds(20), [&] {
    ++rounds;
    return std::set<int>{2};
  });
  late.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10)) << "waited out its patience";
  EXPECT_GT(rounds, 0);
  const std::string report = desyncReport(*g, 10, OpType::Allreduce);
  EXPECT_NE(report.find("Rank 2 never joined allreduce seq 10: it last reported allreduce seq 9"), std::string::npos)
      << report;
  EXPECT_NE(report.find("Ranks 0, 1 and 3 are waiting in it"), std::string::npos) << report;
}

// A rank waiting inside an inline op (track() has not recorded it: the backend call has not
// returned) has joined that op: its progress says so, and the report counts it as waiting.
TEST(DesyncReport, ARankWaitingInsideItsBackendCallHasJoined) {
  auto g = group(2);
  g->lastIssued = 9;
  g->lastIssuedOp = static_cast<uint8_t>(OpType::Broadcast);
  g->lastCompleted = 9;
  g->inBackendCallOp = static_cast<uint8_t>(OpType::Allreduce);
  g->inBackendCall = 10;
  publishProgress(*g);
  progress(*g, 1, 9, "allreduce", 9);
  std::string report = desyncReport(*g, 10, OpType::Allreduce);
  EXPECT_NE(report.find("Rank 1 never joined allreduce seq 10: it last reported allreduce seq 9"), std::string::npos)
      << report;
  EXPECT_NE(report.find("Rank 0 is waiting in it"), std::string::npos) << report;

  // A point-to-point call is not a collective: progress stays at the last collective.
  g->inBackendCallOp = static_cast<uint8_t>(OpType::Send);
  g->inBackendCall = 11;
  publishProgress(*g);
  report = desyncReport(*g, 10, OpType::Allreduce);
  EXPECT_NE(report.find("Rank 0 never joined allreduce seq 10: it last reported broadcast seq 9"), std::string::npos)
      << report;
}

TEST(DesyncReport, ARankThatStaysBehindIsWaitedForOnlyUpToThePatience) {
  auto g = group(2);
  progress(*g, 0, 4, "allreduce", 3);
  progress(*g, 1, 3, "allreduce", 3);
  const auto start = std::chrono::steady_clock::now();
  awaitLateProgress(*g, 4, {1}, std::chrono::milliseconds(200), [] { return std::set<int>{}; });
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(200));
  EXPECT_EQ(ranksBehind(*g, 4, {0, 1}), (std::set<int>{1}));
}

TEST(IncidentLog, IsBoundedAndRefusesLinesPastTheBound) {
  auto g = group(2);
  const std::string line = wire::encode(wire::PeerLost{0, 1, "test"});
  g->store->add(kIncidentCount, kMaxIncidentLines - 1);  // as if the log were nearly full
  EXPECT_FALSE(appendToIncidentLog(*g, {line, line}));
  EXPECT_EQ(g->store->add(kIncidentCount, 0), kMaxIncidentLines - 1);
  EXPECT_TRUE(appendToIncidentLog(*g, {line}));
  EXPECT_EQ(g->store->add(kIncidentCount, 0), kMaxIncidentLines);
  EXPECT_FALSE(appendToIncidentLog(*g, {line}));
  EXPECT_EQ(toString(g->store->get(kIncidentLog)), line);
}

TEST(IncidentLog, AcksThatDoNotDecodeAreNotCounted) {
  auto g = group(3);
  g->store->append(ackKey(0, 1), toBytes(wire::encodeAck(2)));
  g->store->append(ackKey(0, 1), toBytes("garbage\n1,\n"));  // the old format, or noise: not rank 0 or 1
  g->store->append(kIncidentLog, toBytes("incident|x|1|w|5\n"));
  EXPECT_EQ(peersThatDumped(*g, 1, 0, 1000), (std::set<int>{2}));
}

// The per-op path finds its lane record's names through the caller's memo (one load),
// else the group's cache of its last 4 backends (a name compare), else the recorder's
// interning; once the recorder holds ThreadLanes::kMaxNames, the group asks no more and
// its ops go to the shared ring (null), and a memo stays empty.
TEST(RecordNames, ComeFromTheMemoThenTheGroupsCacheAndStopWhenTheRecorderIsFull) {
  FlightRecorder fr(8);
  auto g = group(2);
  RecordNamesMemo memo;
  const RecordNames* shm = recordNamesOf(fr, *g, "shm", &memo);
  ASSERT_NE(shm, nullptr);
  EXPECT_EQ(std::string(shm->group), "main");
  EXPECT_EQ(std::string(shm->backend), "shm");
  EXPECT_EQ(shm->worldSize, 2);
  EXPECT_EQ(memo.get(), shm);
  EXPECT_EQ(recordNamesOf(fr, *g, "shm", nullptr), shm) << "the group's cache";
  EXPECT_EQ(g->recordNames[0].load(), shm);
  g->recordNames[0].store(nullptr);  // the cache emptied: only the memo can answer
  EXPECT_EQ(recordNamesOf(fr, *g, "shm", &memo), shm);
  EXPECT_EQ(g->recordNames[1].load(), nullptr) << "the memo answered without asking the group";
  const RecordNames* gloo = recordNamesOf(fr, *g, "gloo", nullptr);
  EXPECT_NE(gloo, shm);
  const RecordNamesMemo copy(memo);  // a State copied for a live switch fills its own
  EXPECT_EQ(copy.get(), nullptr);
  EXPECT_EQ(recordNamesOf(fr, *g, "gloo", &copy), gloo);

  auto other = group(2);
  other->name = "other";
  for (size_t i = 0; i < ThreadLanes::kMaxNames; ++i) cachedRecordNames(fr, *other, "b" + std::to_string(i));
  EXPECT_TRUE(other->recordNamesFull.load());
  RecordNamesMemo late;
  EXPECT_EQ(recordNamesOf(fr, *other, "one-more", &late), nullptr);
  EXPECT_EQ(late.get(), nullptr) << "the memo stays empty";
  EXPECT_EQ(recordNamesOf(fr, *g, "shm", nullptr), shm) << "names made before stay";
}

// A small op not sampled by its seq is timed when it is its group's first since the
// heartbeat thread's last clock reading: ops issued a few times a second are all timed.
TEST(RecordNames, AGroupsFirstOpSinceTheHeartbeatsTickIsTimedOnce) {
  auto g = group(2);
  auto other = group(2);
  EXPECT_TRUE(firstSinceTick(*g, 1000));
  EXPECT_FALSE(firstSinceTick(*g, 1000));
  EXPECT_FALSE(firstSinceTick(*g, 1000));
  EXPECT_TRUE(firstSinceTick(*other, 1000)) << "each group times its own";
  EXPECT_TRUE(firstSinceTick(*g, 101000)) << "the next tick";
  EXPECT_FALSE(firstSinceTick(*g, 101000));
}

}  // namespace
}  // namespace commhost::supervisor
