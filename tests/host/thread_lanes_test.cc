// SPDX-License-Identifier: Apache-2.0
// The flight recorder's lanes (thread_lanes.h): records of ops that completed in their
// call, one lane per issuing thread, written without a lock, merged with the shared ring
// in the order they were recorded; real threads, readers racing the writers.
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "supervisor/flight_recorder.h"
#include "supervisor/op_stats.h"
#include "test_util.h"

namespace commhost::supervisor {
namespace {

// Every field follows from the seq, so a torn record (half of one op, half of another)
// shows. 97 groups, each with its rank.
std::string groupOf(uint64_t seq) { return "g" + std::to_string(seq % 97); }
int rankOf(uint64_t seq) { return static_cast<int>(seq % 97 % 5); }

void fillFor(OpRecord& r, uint64_t seq) {
  copyName(r.group, sizeof r.group, groupOf(seq));
  copyName(r.backend, sizeof r.backend, "shm");
  r.rank = rankOf(seq);
  r.worldSize = 5;
  r.op = OpType::Allreduce;
  r.seq = seq;
  r.generation = seq * 3;
  r.dtype = DType::Float32;
  r.bytes = static_cast<int64_t>(seq * 4);
  r.numel = static_cast<int64_t>(seq);
  r.state = OpState::Completed;
  r.timed = seq % 2 == 0;
  r.scheduledUs = r.startedUs = r.endedUs = static_cast<int64_t>(seq * 7);
  r.deviceMs = -1;
}

bool whole(const OpRecord& r) {
  return std::string(r.group) == groupOf(r.seq) && std::string(r.backend) == "shm" && r.rank == rankOf(r.seq) &&
         r.worldSize == 5 && r.generation == r.seq * 3 && r.bytes == static_cast<int64_t>(r.seq * 4) &&
         r.numel == static_cast<int64_t>(r.seq) && r.timed == (r.seq % 2 == 0) &&
         (r.timed ? r.endedUs == static_cast<int64_t>(r.seq * 7)  // an untimed op's time is the recorder's
                  : r.scheduledUs == r.endedUs && r.startedUs == r.endedUs) &&
         r.error[0] == '\0';
}

// `e` (with its names) into the calling thread's lane, as a whole; false as
// FlightRecorder::emplaceInLane.
bool inLane(FlightRecorder& fr, const LaneEntry& e) {
  return fr.emplaceInLane(e.names, [&](LaneEntry& d) { d = e; });
}

// As the supervisor records an op that completed in its call: its lane entry (the names
// interned), the full record for the ring when the thread has no lane.
void completed(FlightRecorder& fr, uint64_t seq) {
  LaneEntry e;
  e.seq = seq;
  e.generation = seq * 3;
  e.bytes = static_cast<int64_t>(seq * 4);
  e.scheduledUs = static_cast<int64_t>(seq * 7);
  e.names = fr.intern(groupOf(seq), "shm", rankOf(seq), 5);
  e.timed = seq % 2 == 0;
  if (!inLane(fr, e)) fr.emplace([&](OpRecord& r) { fillFor(r, seq); });
}

// Seqs `from` to `to` completed on a thread of their own, which then exits.
void onNewThread(FlightRecorder& fr, uint64_t from, uint64_t to) {
  std::thread([&] {
    for (uint64_t s = from; s <= to; ++s) completed(fr, s);
  }).join();
}

// Threads that take turns: run(i, f) runs f on worker i (its own thread for the whole
// test, so it keeps its lane) and waits until it is done.
class Turns {
 public:
  explicit Turns(int n) {
    for (int i = 0; i < n; ++i) threads_.emplace_back([this, i] { loop(i); });
  }
  ~Turns() {
    {
      std::lock_guard<std::mutex> l(m_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  void run(int i, std::function<void()> f) {
    std::unique_lock<std::mutex> l(m_);
    job_ = std::move(f);
    who_ = i;
    cv_.notify_all();
    cv_.wait(l, [&] { return who_ < 0; });
  }

 private:
  void loop(int i) {
    std::unique_lock<std::mutex> l(m_);
    for (;;) {
      cv_.wait(l, [&] { return stop_ || who_ == i; });
      if (stop_) return;
      job_();
      who_ = -1;
      cv_.notify_all();
    }
  }
  std::mutex m_;
  std::condition_variable cv_;
  std::function<void()> job_;
  int who_ = -1;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

std::vector<uint64_t> seqs(const std::vector<OpRecord>& records) {
  std::vector<uint64_t> out;
  for (const auto& r : records) out.push_back(r.seq);
  return out;
}

TEST(ThreadLanes, RecordsOfSeveralThreadsAndTheRingMergeInTheOrderRecorded) {
  FlightRecorder fr(64);
  Turns turns(2);
  uint64_t seq = 0;
  for (int round = 0; round < 3; ++round) {
    turns.run(0, [&] {
      for (int i = 0; i < 3; ++i) completed(fr, ++seq);
    });
    turns.run(1, [&] { completed(fr, ++seq); });
    // An op still running goes to the shared ring.
    OpRecord running;
    fillFor(running, ++seq);
    running.state = OpState::Started;
    fr.add(running);
  }
  const auto snap = fr.snapshot();
  std::vector<uint64_t> want;
  for (uint64_t s = 1; s <= seq; ++s) want.push_back(s);
  EXPECT_EQ(seqs(snap), want);
  for (const auto& r : snap) EXPECT_TRUE(r.state == OpState::Started || whole(r)) << r.seq;
  // Dump ids (the order) increase with them.
  for (size_t i = 1; i < snap.size(); ++i) EXPECT_LT(toDumpOp(snap[i - 1]).id, toDumpOp(snap[i]).id);
}

TEST(ThreadLanes, ADumpKeepsTheLastEntriesOfAllLanes) {
  FlightRecorder fr(4);
  Turns turns(2);
  uint64_t seq = 0;
  for (int round = 0; round < 5; ++round)
    for (int t = 0; t < 2; ++t) turns.run(t, [&] { completed(fr, ++seq); });
  EXPECT_EQ(seqs(fr.snapshot()), (std::vector<uint64_t>{7, 8, 9, 10}));
}

TEST(ThreadLanes, ALaneOutlivesItsThreadAndTheNextThreadTakesItOver) {
  FlightRecorder fr(8);
  onNewThread(fr, 1, 3);
  onNewThread(fr, 4, 5);
  EXPECT_EQ(seqs(fr.snapshot()), (std::vector<uint64_t>{1, 2, 3, 4, 5}));
  // One lane served both: an op statistics reader follows one lane.
  std::vector<uint64_t> next;
  std::vector<OpRecord> out;
  uint64_t missed = 0;
  fr.collectLanes(next, 100, out, &missed);
  EXPECT_EQ(next.size(), 1u);
  EXPECT_EQ(seqs(out), (std::vector<uint64_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(missed, 0u);
}

// The op statistics read a bounded number per poll, the newest: what they pass over is
// counted, and the next read starts after the last one read.
TEST(ThreadLanes, AReaderTakesTheNewestRecordsAndCountsThoseItPassedOver) {
  FlightRecorder fr(64);
  for (uint64_t s = 1; s <= 100; ++s) completed(fr, s);
  std::vector<uint64_t> next;
  std::vector<OpRecord> out;
  uint64_t skipped = 0;
  fr.collectLanes(next, 10, out, &skipped);
  EXPECT_EQ(seqs(out), (std::vector<uint64_t>{91, 92, 93, 94, 95, 96, 97, 98, 99, 100}));
  EXPECT_EQ(skipped, 90u);
  for (const auto& r : out) EXPECT_TRUE(whole(r)) << r.seq;
  for (uint64_t s = 101; s <= 103; ++s) completed(fr, s);
  out.clear();
  fr.collectLanes(next, 10, out, &skipped);
  EXPECT_EQ(seqs(out), (std::vector<uint64_t>{101, 102, 103}));
  EXPECT_EQ(skipped, 90u);
}

// The op statistics read a lane's records for their latency only: the untimed ones that
// its counts took say nothing more and are not converted.
TEST(ThreadLanes, AReaderForLatencyTakesTheTimedAndTheUncountedOnly) {
  FlightRecorder fr(64);
  for (uint64_t s = 1; s <= 10; ++s) completed(fr, s);  // even seqs timed
  std::vector<uint64_t> next;
  std::vector<OpRecord> out;
  uint64_t skipped = 0;
  fr.collectLanes(next, 100, out, &skipped, /*informative=*/true);
  EXPECT_EQ(seqs(out), (std::vector<uint64_t>{2, 4, 6, 8, 10}));
  EXPECT_EQ(skipped, 0u);
  for (uint64_t s = 11; s <= 12; ++s) completed(fr, s);
  out.clear();
  fr.collectLanes(next, 100, out, &skipped, true);
  EXPECT_EQ(seqs(out), (std::vector<uint64_t>{12})) << "read on from where the last read ended";
}

// A lane record is one cache line that points at interned names: the group's and the
// backend's full names make one entry, a name too long for the record is cut in it.
TEST(ThreadLanes, NamesAreInternedOncePerGroupBackendAndRank) {
  FlightRecorder fr(8);
  const RecordNames* a = fr.intern("main", "shm", 0, 2);
  EXPECT_EQ(fr.intern("main", "shm", 0, 2), a);
  EXPECT_NE(fr.intern("main", "gloo", 0, 2), a);
  EXPECT_NE(fr.intern("main", "shm", 1, 2), a);
  const std::string longName(100, 'x');
  const RecordNames* cut = fr.intern(longName, "shm", 0, 2);
  EXPECT_EQ(fr.intern(longName, "shm", 0, 2), cut);
  EXPECT_NE(fr.intern(longName + "y", "shm", 0, 2), cut);  // same cut name, another group
  LaneEntry e;
  e.seq = 5;
  e.bytes = 64;
  e.dtype = DType::Float64;
  e.scheduledUs = 1000;
  e.startedAfterUs = 20;
  e.timed = true;
  e.names = cut;
  EXPECT_TRUE(inLane(fr, e)) << "a thread with a lane never records into the ring";
  const auto snap = fr.snapshot();
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_EQ(std::string(snap[0].group), std::string(sizeof(OpRecord::group) - 1, 'x'));
  EXPECT_EQ(snap[0].numel, 8);
  EXPECT_EQ(snap[0].startedUs, 1020);
  EXPECT_EQ(snap[0].endedUs, 1020);
  EXPECT_EQ(snap[0].state, OpState::Completed);
  EXPECT_EQ(snap[0].deviceMs, -1);
}

TEST(ThreadLanes, ThreadsBeyondTheLastLaneRecordIntoTheRing) {
  const int n = static_cast<int>(ThreadLanes::kMaxLanes) + 2;
  FlightRecorder fr(64);
  std::atomic<int> written{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t)
    threads.emplace_back([&, t] {
      completed(fr, static_cast<uint64_t>(t + 1));
      ++written;
      while (written.load() < n) std::this_thread::yield();  // all alive at once: no lane is freed
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(fr.snapshot().size(), static_cast<size_t>(n));
  std::vector<OpRecord> ring;
  uint64_t missed = 0;
  fr.collect(1, 100, ring, &missed);
  EXPECT_EQ(ring.size(), 2u);  // the two threads that found every lane taken
}

// The supervisor (and its recorder) is made anew whenever a process's groups all went and
// another is created: a thread that recorded into each must not keep their lanes (1 MiB
// each at 16384 entries) alive.
TEST(ThreadLanes, ARecorderDestroyedFreesItsLanesThoughTheThreadLivesOn) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "sanitizers keep freed memory (quarantine): RSS says nothing";
#endif
  const long before = test::residentKiB();
  for (int i = 0; i < 100; ++i) {
    FlightRecorder fr(16384);
    for (uint64_t s = 1; s <= 16384; ++s) completed(fr, s);  // every page of the lane touched
  }
  EXPECT_LT(test::residentKiB() - before, 30 * 1024) << "100 recorders of 1 MiB lanes";
}

TEST(ThreadLanes, ReadersNeverSeeATornRecord) {
  FlightRecorder fr(16);  // small: the writer laps the readers all the time
  constexpr uint64_t kOps = 200000;
  std::atomic<bool> done{false};
  std::atomic<int> notInLane{0};
  std::thread writer([&] {
    for (uint64_t s = 1; s <= kOps; ++s) completed(fr, s);
    done = true;
  });
  uint64_t seen = 0, torn = 0, missed = 0;
  std::vector<uint64_t> next;
  std::vector<OpRecord> out;
  OpStatsCollector stats;  // reads the lane's counts as the writer moves them
  while (!done.load()) {
    for (const auto& r : fr.snapshot()) {
      ++seen;
      torn += !whole(r);
    }
    out.clear();
    fr.collectLanes(next, 64, out, &missed);
    for (const auto& r : out) torn += !whole(r);
    seen += out.size();
    stats.poll(fr);
  }
  writer.join();
  EXPECT_EQ(torn, 0u) << "of " << seen << " records read";
  const auto last = fr.snapshot();
  ASSERT_EQ(last.size(), 16u);
  EXPECT_EQ(last.back().seq, kOps);
  // Every op counted: in a cell, or as missed once the lane's cells were all taken.
  stats.poll(fr);
  uint64_t counted = 0;
  for (const auto& [key, cell] : stats.stats().cells()) counted += cell.completed;
  EXPECT_EQ(counted + stats.stats().missed(), kOps);
  EXPECT_GT(counted, 0u);
}

TEST(ThreadLanes, OpStatisticsCountLaneRecordsAndTheirLatencyOnlyWhenTimed) {
  FlightRecorder fr(8);
  OpStatsCollector c;
  for (uint64_t s = 1; s <= 20; ++s) completed(fr, s);
  c.poll(fr);
  EXPECT_EQ(c.stats().missed(), 0u);  // counted, though the lane holds 8 of the 20
  uint64_t completedOps = 0, timed = 0, bytes = 0;
  for (const auto& [key, cell] : c.stats().cells()) {
    completedOps += cell.completed;
    timed += cell.timed;
    bytes += cell.bytes;
  }
  EXPECT_EQ(completedOps, 20u);
  EXPECT_EQ(bytes, 4u * 210);  // seq * 4 bytes each
  EXPECT_EQ(timed, 4u);        // the even seqs of the 8 held
  completed(fr, 21);
  c.poll(fr);
  c.poll(fr);
  completedOps = 0;
  for (const auto& [key, cell] : c.stats().cells()) completedOps += cell.completed;
  EXPECT_EQ(completedOps, 21u);
}

// An untimed op reads no clock: its record carries the later of its thread's last timed
// op and the heartbeat's last clock reading.
TEST(ThreadLanes, AnUntimedOpTakesTheLaterOfTheLastTimedOpAndTheRecentClock) {
  FlightRecorder fr(8);
  const RecordNames* names = fr.intern("main", "shm", 0, 2);
  const auto record = [&](uint64_t seq, bool timed, int64_t at) {
    LaneEntry e;
    e.seq = seq;
    e.names = names;
    e.timed = timed;
    e.scheduledUs = at;
    e.startedAfterUs = timed ? 3 : 0;
    ASSERT_TRUE(inLane(fr, e));
  };
  refreshWallClockOffset();
  const int64_t recent = recentWallMicros();
  record(1, false, 0);
  record(2, true, recent + 1000000);  // a second ahead of the recent reading
  record(3, false, 0);
  record(4, true, recent - 1000000);  // a second behind it
  record(5, false, 0);
  const auto snap = fr.snapshot();
  ASSERT_EQ(snap.size(), 5u);
  // (Another test's heartbeat thread may read the clock meanwhile: milliseconds later.)
  EXPECT_GE(snap[0].scheduledUs, recent);
  EXPECT_LT(snap[0].scheduledUs, recent + 1000000);
  EXPECT_EQ(snap[2].scheduledUs, recent + 1000003);  // when seq 2 started
  EXPECT_GE(snap[4].scheduledUs, recent);
  EXPECT_LT(snap[4].scheduledUs, recent + 1000000);
  for (const auto& r : snap) {
    if (!r.timed) {
      EXPECT_EQ(r.endedUs, r.scheduledUs) << r.seq;
    }
  }
}

// An 8 B loop runs millions of ops a second and a poll reads a few hundred records: the
// lane's counts still give every op, per size class.
TEST(ThreadLanes, OpStatisticsCountEveryOpOfALaneThatHoldsFew) {
  FlightRecorder fr(4);
  OpStatsCollector c;
  const RecordNames* names = fr.intern("main", "shm", 0, 2);
  uint64_t seq = 0;
  const auto run = [&](int n) {
    for (int i = 0; i < n; ++i) {
      LaneEntry e;
      e.seq = ++seq;
      e.bytes = seq % 2 ? 8 : 4096;
      e.names = names;
      e.timed = seq % 8 == 0;
      ASSERT_TRUE(inLane(fr, e));
    }
  };
  run(10000);
  c.poll(fr);
  run(10);
  c.poll(fr);
  c.poll(fr);
  const auto& cells = c.stats().cells();
  ASSERT_EQ(cells.size(), 2u);
  const OpCell& small = cells.at(OpKey{"main", OpType::Allreduce, "shm", 0});
  const OpCell& larger = cells.at(OpKey{"main", OpType::Allreduce, "shm", 1});
  EXPECT_EQ(small.completed, 5005u);
  EXPECT_EQ(small.bytes, 5005u * 8);
  EXPECT_EQ(larger.completed, 5005u);
  EXPECT_EQ(larger.bytes, 5005u * 4096);
  EXPECT_EQ(small.timed, 0u);  // the timed seqs are even: 4096 B
  EXPECT_GT(larger.timed, 0u);
  EXPECT_EQ(c.stats().missed(), 0u);
}

// A lane keys at most ThreadLanes::kCounts cells. The ops of a key beyond them, while
// the reader has not yet taken every op of some cell, are counted from the records read,
// with their labels, and the rest of them as missed.
TEST(ThreadLanes, OpsOfKeysBeyondALanesCellsAreCountedFromTheirRecords) {
  FlightRecorder fr(8);
  OpStatsCollector c;
  const auto record = [&](uint64_t seq, const std::string& group) {
    LaneEntry e;
    e.seq = seq;
    e.names = fr.intern(group, "shm", 0, 2);
    ASSERT_TRUE(inLane(fr, e));
  };
  uint64_t seq = 0;
  for (size_t k = 0; k < ThreadLanes::kCounts; ++k) record(++seq, "g" + std::to_string(k));
  for (int i = 0; i < 3; ++i) record(++seq, "late");  // no cell the reader took: read from the records
  c.poll(fr);
  const auto completedOf = [&](const std::string& group) {
    uint64_t n = 0;
    for (const auto& [key, cell] : c.stats().cells())
      if (key.group == group) n += cell.completed;
    return n;
  };
  EXPECT_EQ(completedOf("g0"), 1u);
  EXPECT_EQ(completedOf("late"), 3u);
  EXPECT_EQ(c.stats().missed(), 0u);
  // Every cell gains an op the reader has not taken; of the 100, the lane holds 8.
  for (size_t k = 0; k < ThreadLanes::kCounts; ++k) record(++seq, "g" + std::to_string(k));
  for (int i = 0; i < 100; ++i) record(++seq, "late");
  c.poll(fr);
  EXPECT_EQ(completedOf("late"), 3u + 8);
  EXPECT_EQ(c.stats().missed(), 92u);
}

// Once the reader has taken all of a cell, a new key reuses it: a thread that goes
// through many more keys than cells (groups made and dropped, swaps) keeps exact counts,
// each op under its own key, as long as the reader reads between the keys.
TEST(ThreadLanes, ACellTheReaderTookAllOfIsReusedAndEveryOpKeepsItsKey) {
  FlightRecorder fr(8);
  OpStatsCollector c;
  uint64_t seq = 0;
  const size_t keys = 5 * ThreadLanes::kCounts;
  for (size_t k = 0; k < keys; ++k) {
    LaneEntry e;
    e.names = fr.intern("g" + std::to_string(k), "shm", 0, 2);
    for (size_t i = 0; i <= k % 3; ++i) {  // 1, 2 or 3 ops: each key's count is its own
      e.seq = ++seq;
      e.bytes = static_cast<int64_t>(8 * (k + 1));
      ASSERT_TRUE(inLane(fr, e));
    }
    if (k % 16 == 15) c.poll(fr);
  }
  c.poll(fr);
  std::map<std::string, std::pair<uint64_t, uint64_t>> got;  // group: ops, bytes
  for (const auto& [key, cell] : c.stats().cells()) {
    got[key.group].first += cell.completed;
    got[key.group].second += cell.bytes;
  }
  ASSERT_EQ(got.size(), keys);
  for (size_t k = 0; k < keys; ++k) {
    const auto& [ops, bytes] = got["g" + std::to_string(k)];
    EXPECT_EQ(ops, k % 3 + 1) << k;
    EXPECT_EQ(bytes, (k % 3 + 1) * 8 * (k + 1)) << k;
  }
  EXPECT_EQ(c.stats().missed(), 0u);
}

// A reader polling while its writer goes through more keys than cells, on another thread:
// whatever the interleaving, no op is added under another key (each key has its own op
// count and size), and every op is counted or missed, exactly once.
TEST(ThreadLanes, AReaderRacingCellReuseNeverMovesAnOpToAnotherKey) {
  FlightRecorder fr(1 << 12);
  OpStatsCollector c;
  const size_t keys = 8 * ThreadLanes::kCounts;
  std::atomic<bool> done{false};
  std::atomic<int> notInLane{0};
  std::thread writer([&] {
    uint64_t seq = 0;
    for (size_t round = 0; round < 4; ++round)
      for (size_t k = 0; k < keys; ++k) {
        LaneEntry e;
        e.names = fr.intern("g" + std::to_string(k), "shm", 0, 2);
        e.bytes = static_cast<int64_t>(k + 1);
        for (size_t i = 0; i <= k % 4; ++i) {
          e.seq = ++seq;
          if (!inLane(fr, e)) notInLane.fetch_add(1);
        }
      }
    done.store(true);
  });
  while (!done.load()) c.poll(fr);
  writer.join();
  c.poll(fr);
  EXPECT_EQ(notInLane.load(), 0);
  uint64_t total = 0;
  for (const auto& [key, cell] : c.stats().cells()) {
    const size_t k = std::stoul(key.group.substr(1));
    EXPECT_LE(cell.completed, 4 * (k % 4 + 1)) << key.group;
    EXPECT_EQ(cell.bytes, cell.completed * (k + 1)) << key.group;
    total += cell.completed;
  }
  size_t opsPerRound = 0;
  for (size_t k = 0; k < keys; ++k) opsPerRound += k % 4 + 1;
  EXPECT_EQ(total + c.stats().missed(), 4 * opsPerRound);
}

// The slot's version follows from the lane's lap: a lane that went round, taken over by
// another thread, and of one slot, still hands readers whole records of the right seqs.
TEST(ThreadLanes, ALapCountedVersionHoldsAcrossTakeoverAndOneSlot) {
  {
    FlightRecorder fr(4);
    onNewThread(fr, 1, 6);
    onNewThread(fr, 7, 9);
    EXPECT_EQ(seqs(fr.snapshot()), (std::vector<uint64_t>{6, 7, 8, 9}));
    for (const auto& r : fr.snapshot()) EXPECT_TRUE(whole(r)) << r.seq;
  }
  FlightRecorder one(1);
  for (uint64_t s = 1; s <= 5; ++s) {
    completed(one, s);
    const auto snap = one.snapshot();
    ASSERT_EQ(snap.size(), 1u);
    EXPECT_EQ(snap[0].seq, s);
    EXPECT_TRUE(whole(snap[0]));
  }
}

}  // namespace
}  // namespace commhost::supervisor
