// SPDX-License-Identifier: Apache-2.0
// The supervisor with real gloo ranks as threads over a HashStore: a rank that never
// joins, a peer that stops beating, mismatched calls under check_collectives, the
// flight recorder's bound and dumps, completion hooks on their own thread.
#include <signal.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "supervisor/clock.h"
#include "test_util.h"

namespace commhost::test {
namespace {

namespace fs = std::filesystem;

// A supervisor may still be writing a dump (another rank's incident reaches it on its own
// thread) when a test ends: cleaning up must not fail the test.
void removeQuietly(const fs::path& dir) {
  std::error_code ignored;
  fs::remove_all(dir, ignored);
}

std::string tempDir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("commhost-sup-" + name + "-" + std::to_string(::getpid()));
  removeQuietly(dir);
  return dir.string();
}

// group.timeout is gloo's own deadline too (its contexts keep one), so a short one lets
// the ranks left inside Gloo by a hang return quickly when the test ends.
std::string glooConfig(const std::string& dumpDir, const std::string& extra = "", const std::string& timeout = "20s") {
  return "group: { timeout: " + timeout +
         " }\n"
         "backends: { gloo: { options: { threads: 1 } } }\n"
         "routes: [{ device: cpu, backend: gloo }]\n"
         "supervisor:\n"
         "  watchdog: { poll: 20ms }\n"
         "  heartbeat: { interval: 50ms, timeout: 400ms }\n"
         "  flight_recorder: { entries: 16, dump_dir: " +
         dumpDir + " }\n" + extra;
}

void allreduceOnes(ProcessGroup& pg, int64_t n = 4, std::chrono::milliseconds timeout = {}) {
  Tensor t = Tensor::empty({n}, DType::Float32);
  for (int64_t i = 0; i < n; ++i) t.data_as<float>()[i] = 1;
  AllreduceOptions opts;
  opts.timeout = timeout;
  pg.allreduce(t, opts)->wait();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(t.data_as<float>()[i], pg.size());
}

nlohmann::json readJson(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// Ranks as threads share one process, hence one dump, named after the first group made.
std::string onlyDump(const std::string& dir) {
  std::vector<std::string> found;
  for (const auto& f : fs::directory_iterator(dir))
    if (f.path().extension() == ".json") found.push_back(f.path().string());
  EXPECT_EQ(found.size(), 1u) << dir;
  return found.empty() ? dir + "/missing.json" : found[0];
}

// Runs `fn`; a commhost::Error it throws is rethrown after its context is copied to `where`.
template <class F> void keepWhere(ErrorContext& where, F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    where = e.where();
    throw;
  }
}

TEST(Supervisor, RankThatNeverJoinsIsNamedWithTheSeq) {
  const std::string dir = tempDir("hang");
  auto groups = makeGroups(glooConfig(dir, "", "1s"), 3);
  runRanks(3, [&](int r) {
    for (int i = 0; i < 3; ++i) allreduceOnes(*groups[r]);
    if (r == 2) return;  // rank 2 skips seq 4
    ErrorContext where;
    EXPECT_THROW_WITH(keepWhere(where, [&] { allreduceOnes(*groups[r]); }), TimeoutError, "allreduce seq 4",
                      "Rank 2 never joined allreduce seq 4", "last reported allreduce seq 3 (completed)",
                      "trace analyze");
    // The watchdog's verdict keeps its context through the work's wait() (Error::where()).
    EXPECT_EQ(where.rank, r);
    EXPECT_EQ(where.seq, 4u);
    EXPECT_STREQ(where.op ? where.op : "", "allreduce");
  });
  // on_error: abort (the default) aborted the group on the detecting ranks.
  EXPECT_THROW_WITH(allreduceOnes(*groups[0]), AbortedError, "aborted");
  const auto dump = readJson(onlyDump(dir));
  bool sawFailedSeq4 = false;
  for (const auto& e : dump["entries"])
    if (e["seq"] == 4 && e["state"] == "failed") sawFailedSeq4 = true;
  EXPECT_TRUE(sawFailedSeq4) << dump.dump(1);
  groups[0].reset();
  groups[1].reset();
  groups[2].reset();
  removeQuietly(dir);
}

// flight_recorder.entries 0 turns the per-op records off (and with them the clock reads
// of ops a backend completes inline), not the watchdog, the heartbeat or the progress
// counters the verdicts are made of.
TEST(Supervisor, FlightRecorderOffStillCatchesAHang) {
  const std::string dir = tempDir("off");
  std::string config = glooConfig(dir, "", "1s");
  config.replace(config.find("entries: 16"), 11, "entries: 0");
  auto groups = makeGroups(config, 2);
  runRanks(2, [&](int r) {
    for (int i = 0; i < 3; ++i) allreduceOnes(*groups[r]);
    if (r == 1) return;  // rank 1 skips seq 4
    EXPECT_THROW_WITH(allreduceOnes(*groups[r]), TimeoutError, "allreduce seq 4", "Rank 1 never joined allreduce seq 4",
                      "last reported allreduce seq 3 (completed)");
  });
  const auto dump = readJson(onlyDump(dir));
  EXPECT_EQ(dump["entries_capacity"], 0);
  EXPECT_TRUE(dump["entries"].empty()) << dump.dump(1);
  bool sawRank1 = false;
  for (const auto& g : dump["groups"])
    if (g["rank"] == 1) {
      sawRank1 = true;
      EXPECT_EQ(g["last_completed"], 3);
    }
  EXPECT_TRUE(sawRank1) << dump.dump(1);
  groups[0].reset();
  groups[1].reset();
  removeQuietly(dir);
}

// One rank's view of the job's store that can be cut off, as a crashed process is: from
// then on nothing it would say reaches the store (not even that it left its group).
class CuttableStore final : public StoreBase {
 public:
  explicit CuttableStore(StorePtr inner) : inner_(std::move(inner)) {}
  std::atomic<bool> cut{false};
  void set(const std::string& k, const Bytes& v) override { live()->set(k, v); }
  Bytes get(const std::string& k) override { return live()->get(k); }
  int64_t add(const std::string& k, int64_t d) override { return live()->add(k, d); }
  Bytes compareSet(const std::string& k, const Bytes& e, const Bytes& d) override {
    return live()->compareSet(k, e, d);
  }
  using Store::wait;
  void wait(const std::vector<std::string>& k, std::chrono::milliseconds t) override { live()->wait(k, t); }
  bool check(const std::vector<std::string>& k) override { return live()->check(k); }
  bool deleteKey(const std::string& k) override { return live()->deleteKey(k); }
  int64_t numKeys() override { return live()->numKeys(); }
  void append(const std::string& k, const Bytes& v) override { live()->append(k, v); }

 private:
  Store* live() {
    if (cut) throw StoreError("this rank's store connection is cut (test)");
    return inner_.get();
  }
  StorePtr inner_;
};

TEST(Supervisor, SilentPeerFailsWorksWithPeerLostLongBeforeTheTimeout) {
  const std::string dir = tempDir("peer");
  auto registry = testRegistry();
  auto config = configFrom(glooConfig(dir), *registry);
  auto store = std::make_shared<HashStore>(std::chrono::seconds(20));
  auto doomed = std::make_shared<CuttableStore>(store);
  std::vector<std::shared_ptr<ProcessGroup>> groups(3);
  runRanks(3, [&](int r) {
    groups[r] = ProcessGroup::create({config, registry, r == 2 ? StorePtr(doomed) : StorePtr(store), r, 3});
  });
  runRanks(3, [&](int r) { allreduceOnes(*groups[r]); });
  doomed->cut = true;  // rank 2 crashes: its heartbeat stops, then its sockets close
  groups[2].reset();
  // Its sockets closed too, so the backend names it before the heartbeat would (the
  // heartbeat is the fallback for peers that go silent with their sockets open).
  runRanks(2, [&](int r) {
    ErrorContext where;
    EXPECT_THROW_WITH(keepWhere(where, [&] { allreduceOnes(*groups[r], 4, std::chrono::seconds(60)); }), PeerLostError,
                      "peer 2 lost", "allreduce seq 2");
    EXPECT_EQ(where.peer, 2);  // a typed field, through the supervised work's wait()
    EXPECT_EQ(where.seq, 2u);
  });
  removeQuietly(dir);
}

TEST(Supervisor, CheckCollectivesReportsTheDiffOnEveryRankAndSendsNothing) {
  const std::string dir = tempDir("check");
  auto groups = makeGroups(glooConfig(dir, "debug: { check_collectives: true }\n"), 3);
  runRanks(3, [&](int r) {
    EXPECT_THROW_WITH(allreduceOnes(*groups[r], r == 1 ? 5 : 4), InvalidArgument, "seq 1",
                      "ranks 0 and 2 called allreduce(tensor=f32[4]", "rank 1 called allreduce(tensor=f32[5]",
                      "nothing was sent");
    allreduceOnes(*groups[r]);  // the group is still usable
  });
  removeQuietly(dir);
}

// A second thread issuing on a group while another thread's call is in progress is
// refused (naming both calls), sends nothing, and leaves the group usable; calls from
// different threads one after another pass. Rank 0's first thread is held inside its
// allreduce by the fingerprint exchange until rank 1 issues, after the refusal.
TEST(Supervisor, CheckCollectivesRefusesASecondThreadIssuingMeanwhile) {
  const std::string dir = tempDir("threads");
  auto groups = makeGroups(glooConfig(dir, "debug: { check_collectives: true }\n"), 2);
  std::mutex mu;
  std::condition_variable cv;
  bool refused = false;
  runRanks(2, [&](int r) {
    ProcessGroup& pg = *groups[r];
    if (r == 1) {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return refused; });
      lock.unlock();
      allreduceOnes(pg);
      allreduceOnes(pg);
      return;
    }
    std::thread first([&] { allreduceOnes(pg); });
    while (pg.seq() < 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // inside its call
    std::thread second([&] {
      Tensor t = Tensor::empty({4}, DType::Float32);
      EXPECT_THROW_WITH(pg.broadcast(t, BroadcastOptions{})->wait(), InvalidArgument, "broadcast seq 2", "while thread",
                        "was still issuing allreduce on the same group", "nothing was sent", "one thread at a time");
      {
        std::lock_guard<std::mutex> lock(mu);
        refused = true;
      }
      cv.notify_all();
    });
    second.join();
    first.join();
    std::thread third([&] { allreduceOnes(pg); });  // after the first: not overlapping
    third.join();
    EXPECT_EQ(pg.seq(), 2u);  // the refused call took no seq
  });
  removeQuietly(dir);
}

// Calls that legitimately differ by rank pass the check: root-only lists of gather and
// scatter, and alltoall_single with uneven splits.
TEST(Supervisor, CheckCollectivesAcceptsWhatRanksMayPassDifferently) {
  const std::string dir = tempDir("check-ok");
  auto groups = makeGroups(glooConfig(dir, "debug: { check_collectives: true }\n"), 2);
  runRanks(2, [&](int r) {
    ProcessGroup& pg = *groups[r];
    Tensor mine = Tensor::empty({2}, DType::Float32);
    for (int i = 0; i < 2; ++i) mine.data_as<float>()[i] = static_cast<float>(10 * r + i);
    std::vector<Tensor> gathered;
    if (r == 0) gathered = {Tensor::empty({2}, DType::Float32), Tensor::empty({2}, DType::Float32)};
    GatherOptions gopts;
    pg.gather(gathered, mine, gopts)->wait();
    if (r == 0) {
      EXPECT_EQ(gathered[1].data_as<float>()[1], 11.0f);
    }
    Tensor piece = Tensor::empty({2}, DType::Float32);
    ScatterOptions sopts;
    pg.scatter(piece, gathered, sopts)->wait();
    EXPECT_EQ(piece.data_as<float>()[0], static_cast<float>(10 * r));
    // Rank 0 sends 1 row to itself and 2 to rank 1; rank 1 sends 3 to rank 0 and 1 to itself.
    const std::vector<std::vector<int64_t>> send = {{1, 2}, {3, 1}};
    AlltoallSingleOptions aopts;
    aopts.inputSplitSizes = send[r];
    aopts.outputSplitSizes = {send[0][r], send[1][r]};
    Tensor in = Tensor::empty({send[r][0] + send[r][1]}, DType::Float32);
    Tensor out = Tensor::empty({aopts.outputSplitSizes[0] + aopts.outputSplitSizes[1]}, DType::Float32);
    for (int64_t i = 0; i < in.numel(); ++i) in.data_as<float>()[i] = static_cast<float>(100 * r + i);
    pg.alltoallSingle(out, in, aopts)->wait();
    EXPECT_EQ(out.data_as<float>()[out.numel() - 1], r == 0 ? 100.0f + 2 : 100.0f + 3);
  });
  removeQuietly(dir);
}

// The supervisors started while it lives run on a ManualClock: their watchdog and
// heartbeat run a round only when the test moves the clock.
class ManualTime {
 public:
  ManualTime() : clock_(std::make_shared<supervisor::ManualClock>()) { supervisor::useClockForTesting(clock_); }
  ~ManualTime() { supervisor::useClockForTesting(nullptr); }
  void advance(std::chrono::milliseconds by) { clock_->advance(by); }

 private:
  std::shared_ptr<supervisor::ManualClock> clock_;
};

TEST(Supervisor, PeerThatDestroyedItsGroupIsNotReportedLost) {
  const std::string dir = tempDir("left");
  ManualTime time;
  auto groups = makeGroups(glooConfig(dir), 2);
  runRanks(2, [&](int r) { allreduceOnes(*groups[r]); });
  groups[1].reset();                              // rank 1 is done with the group; rank 0 keeps its own
  time.advance(std::chrono::milliseconds(1000));  // > heartbeat.timeout 400ms
  const auto dump = readJson(dumpFlightRecorder("test"));
  ASSERT_EQ(dump["groups"].size(), 1u);
  EXPECT_EQ(dump["groups"][0]["rank"], 0);
  EXPECT_TRUE(dump["groups"][0]["lost_peers"].empty()) << dump["groups"][0]["lost_peers"].dump();
  EXPECT_EQ(dump["groups"][0]["left_peers"], nlohmann::json::array({1}));
  groups.clear();
  removeQuietly(dir);
}

// heartbeat.timeout is measured on the supervisor's clock: a peer that stops beating
// (its store cut, its sockets open) is not lost 300 ms of clock time later, and is lost
// once the timeout (400 ms) has passed, whatever the real time taken.
TEST(Supervisor, SilentPeerIsLostExactlyAfterTheHeartbeatTimeout) {
  const std::string dir = tempDir("silent");
  ManualTime time;
  auto registry = testRegistry();
  auto config = configFrom(glooConfig(dir), *registry);
  auto store = std::make_shared<HashStore>(std::chrono::seconds(20));
  auto doomed = std::make_shared<CuttableStore>(store);
  std::vector<std::shared_ptr<ProcessGroup>> groups(2);
  runRanks(2, [&](int r) {
    groups[r] = ProcessGroup::create({config, registry, r == 1 ? StorePtr(doomed) : StorePtr(store), r, 2});
  });
  doomed->cut = true;  // rank 1 never beats
  const auto lostOfRank0 = [] {
    const auto dump = readJson(dumpFlightRecorder("test"));
    for (const auto& g : dump["groups"])
      if (g["rank"] == 0) return g["lost_peers"];
    return nlohmann::json();
  };
  time.advance(std::chrono::milliseconds(300));
  EXPECT_TRUE(lostOfRank0().empty()) << lostOfRank0().dump();
  time.advance(std::chrono::milliseconds(400));
  const auto lost = lostOfRank0();
  ASSERT_TRUE(lost.contains("1")) << lost.dump();
  EXPECT_NE(lost["1"].get<std::string>().find("no heartbeat for"), std::string::npos) << lost.dump();
  groups.clear();
  removeQuietly(dir);
}

// A store that stops answering is said at once (an etcd killed or out of space was
// silent for 20 s, until the program's own next store call), and with an op in flight
// on_error applies: with the default abort, the op ends and the group's next call says
// why it was aborted.
TEST(Supervisor, ALostStoreIsReportedAtOnceAndAppliesOnError) {
  const std::string dir = tempDir("storelost");
  auto registry = testRegistry();
  // Queued ops (inline_max 0): the allreduce below returns at once and stays in flight.
  auto config = configFrom(glooConfig(dir), *registry, {"backends.gloo.options.inline_max=0"});
  auto store = std::make_shared<HashStore>(std::chrono::seconds(20));
  auto doomed = std::make_shared<CuttableStore>(store);
  std::vector<std::shared_ptr<ProcessGroup>> groups(2);
  runRanks(2, [&](int r) {
    groups[r] = ProcessGroup::create({config, registry, r == 1 ? StorePtr(doomed) : StorePtr(store), r, 2});
  });
  Tensor t = Tensor::empty({4}, DType::Float32);
  auto inFlight = groups[1]->allreduce(t);  // rank 0 never joins
  doomed->cut = true;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(inFlight->wait(std::chrono::seconds(15)), Error);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10)) << "ended by the 20 s timeout";
  EXPECT_THROW_WITH(groups[1]->allreduce(t), AbortedError,
                    "the group was aborted ([group main rank 1] the job's store failed this rank's heartbeat",
                    "check the store server");
  groups.clear();
  removeQuietly(dir);
}

TEST(Supervisor, FlightRecorderKeepsTheLastEntriesOnly) {
  const std::string dir = tempDir("ring");
  auto groups = makeGroups(glooConfig(dir), 2);
  runRanks(2, [&](int r) {
    for (int i = 0; i < 20; ++i) allreduceOnes(*groups[r]);
  });
  const auto dump = readJson(dumpFlightRecorder("test"));
  ASSERT_EQ(dump["entries"].size(), 16u);  // 40 ops recorded, both ranks share the process ring
  EXPECT_EQ(dump["entries_capacity"], 16);
  int newest = 0;
  for (const auto& e : dump["entries"]) {
    // The last 16 of 40 records: seq 13-20 of both ranks, give or take one, as a rank
    // records an op once its backend took it, which may be after its peer's next one.
    EXPECT_GE(e["seq"].get<int>(), 12);
    newest = std::max(newest, e["seq"].get<int>());
    EXPECT_EQ(e["state"], "completed");
    EXPECT_EQ(e["op"], "allreduce");
    EXPECT_EQ(e["bytes"], 16);
    EXPECT_GE(e["ended_us"].get<int64_t>(), e["started_us"].get<int64_t>());
  }
  EXPECT_EQ(newest, 20);
  removeQuietly(dir);
}

TEST(Supervisor, Sigusr1Dumps) {
  const std::string dir = tempDir("usr1");
  ManualTime time;
  auto groups = makeGroups(glooConfig(dir), 2);
  runRanks(2, [&](int r) { allreduceOnes(*groups[r]); });
  ::raise(SIGUSR1);
  time.advance(std::chrono::milliseconds(100));  // a heartbeat round runs before this returns
  ASSERT_TRUE(fs::exists(dir));
  EXPECT_EQ(readJson(onlyDump(dir))["reason"], "SIGUSR1");
  removeQuietly(dir);
}

TEST(Supervisor, CompletionHooksRunOnTheirOwnThreadInOrder) {
  const std::string dir = tempDir("hooks");
  auto groups = makeGroups(glooConfig(dir), 2);
  std::mutex m;
  std::condition_variable cv;
  std::vector<CompletionEvent> events;
  std::set<std::thread::id> hookThreads;
  const int id = groups[0]->addCompletionHook([&](const CompletionEvent& ev) {
    std::lock_guard<std::mutex> lock(m);
    events.push_back(ev);
    hookThreads.insert(std::this_thread::get_id());
    cv.notify_all();
  });
  std::thread::id rank0Thread;
  runRanks(2, [&](int r) {
    if (r == 0) rank0Thread = std::this_thread::get_id();
    for (int i = 0; i < 5; ++i) allreduceOnes(*groups[r], 8);
  });
  std::unique_lock<std::mutex> lock(m);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return events.size() >= 5; }));
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(events[i].seq, i + 1);
    EXPECT_EQ(events[i].op, OpType::Allreduce);
    EXPECT_EQ(events[i].rank, 0);
    EXPECT_EQ(events[i].bytes, 32);
    EXPECT_TRUE(events[i].error.empty());
    EXPECT_EQ(events[i].backend, "gloo");
    EXPECT_GE(events[i].end, events[i].start);
    EXPECT_EQ(events[i].end - events[i].start, events[i].duration);
  }
  EXPECT_EQ(hookThreads.size(), 1u);
  EXPECT_EQ(hookThreads.count(rank0Thread), 0u);
  lock.unlock();
  groups[0]->removeCompletionHook(id);
}

// A backend that completes the op inline (self) skips the watchdog, yet the op is in the
// flight recorder as completed, moves the progress and reaches the hooks.
TEST(Supervisor, InlineCompletedWorksAreRecordedAndReachHooks) {
  const std::string dir = tempDir("inline");
  auto registry = testRegistry();
  auto config = configFrom(std::string(kSelfConfig) + "supervisor: { flight_recorder: { dump_dir: " + dir + " } }\n",
                           *registry);
  auto pg = ProcessGroup::create({config, registry, std::make_shared<HashStore>(), 0, 1});
  std::mutex m;
  std::condition_variable cv;
  std::vector<CompletionEvent> events;
  pg->addCompletionHook([&](const CompletionEvent& ev) {
    std::lock_guard<std::mutex> lock(m);
    events.push_back(ev);
    cv.notify_all();
  });
  for (int i = 0; i < 3; ++i) allreduceOnes(*pg);
  {
    std::unique_lock<std::mutex> lock(m);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return events.size() >= 3; }));
    EXPECT_EQ(events[2].seq, 3u);
    EXPECT_EQ(events[2].backend, "self");
    EXPECT_TRUE(events[2].error.empty());
  }
  const auto dump = readJson(dumpFlightRecorder("test"));
  ASSERT_EQ(dump["entries"].size(), 3u);
  EXPECT_EQ(dump["entries"][2]["state"], "completed");
  EXPECT_EQ(dump["entries"][2]["backend"], "self");
  EXPECT_EQ(dump["groups"][0]["last_completed"], 3);
  pg.reset();
  removeQuietly(dir);
}

// Small ops are timed by their seq (every time_every-th, the same on every rank) and as
// their group's first since the heartbeat's last tick; the rest read no clock. A loop of
// 8 B ops in far less than a tick: seq 1 (the first), 64 and 128 timed, hardly any other.
TEST(Supervisor, SmallOpsAreTimedByTheirSeqAndAsTheFirstSinceTheHeartbeatsTick) {
  const std::string dir = tempDir("timed");
  auto registry = testRegistry();
  auto config = configFrom(
      std::string(kSelfConfig) + "supervisor: { flight_recorder: { entries: 256, dump_dir: " + dir + " } }\n",
      *registry);
  auto pg = ProcessGroup::create({config, registry, std::make_shared<HashStore>(), 0, 1});
  for (int i = 0; i < 130; ++i) allreduceOnes(*pg, 2);
  const auto dump = readJson(dumpFlightRecorder("test"));
  ASSERT_EQ(dump["entries"].size(), 130u);
  std::set<uint64_t> timed;
  for (const auto& e : dump["entries"])
    if (e.value("timed", true)) timed.insert(e["seq"].get<uint64_t>());  // written when false
  EXPECT_TRUE(timed.count(1)) << "the group's first op";
  EXPECT_TRUE(timed.count(64));
  EXPECT_TRUE(timed.count(128));
  EXPECT_LE(timed.size(), 4u) << "one more at most, should a tick land in the loop";
  pg.reset();
  removeQuietly(dir);
}

// A hook that drops the last reference to its group releases the supervisor on the
// hook thread, which cannot join itself: the supervisor is stopped on a thread of its
// own, and the next group gets a fresh one.
TEST(Supervisor, LastGroupReleasedByAHookStopsTheSupervisorOffItsThreads) {
  auto registry = testRegistry();
  auto config = configFrom(kSelfConfig, *registry);
  auto holder = std::make_shared<std::shared_ptr<ProcessGroup>>(
      ProcessGroup::create({config, registry, std::make_shared<HashStore>(), 0, 1}));
  std::mutex m;
  std::condition_variable cv;
  bool released = false;
  bool callerDone = false;  // the main thread no longer touches the group
  (*holder)->addCompletionHook([holder, &m, &cv, &released, &callerDone](const CompletionEvent&) {
    {
      // Until allreduceOnes has returned: it still reads the group after wait().
      std::unique_lock<std::mutex> lock(m);
      cv.wait_for(lock, std::chrono::seconds(10), [&] { return callerDone; });
    }
    holder->reset();  // the last reference: ~ProcessGroup runs here, on the hook thread
    std::lock_guard<std::mutex> lock(m);
    released = true;
    cv.notify_all();
  });
  std::weak_ptr<ProcessGroup> weak = *holder;
  allreduceOnes(**holder);
  holder.reset();  // the hook's copy is the last
  {
    std::lock_guard<std::mutex> lock(m);
    callerDone = true;
    cv.notify_all();
  }
  {
    std::unique_lock<std::mutex> lock(m);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return released; }));
  }
  EXPECT_TRUE(weak.expired());
  EXPECT_EQ(dumpFlightRecorder("test"), "");  // no supervisor: no group alive
  auto next = ProcessGroup::create({config, registry, std::make_shared<HashStore>(), 0, 1});
  allreduceOnes(*next);
  EXPECT_NE(dumpFlightRecorder("test"), "");
}

TEST(Supervisor, OffMeansNoHooksAndPlainWorks) {
  auto registry = testRegistry();
  auto config = configFrom(kSelfConfig, *registry, {"supervisor.enabled=false"});
  auto pg = ProcessGroup::create({config, registry, std::make_shared<HashStore>(), 0, 1});
  EXPECT_THROW_WITH(pg->addCompletionHook([](const CompletionEvent&) {}), InvalidArgument, "supervisor.enabled");
  allreduceOnes(*pg);
}

}  // namespace
}  // namespace commhost::test
