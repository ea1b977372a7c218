// SPDX-License-Identifier: Apache-2.0
// ProcessGroup::syncPoint: ranks as threads over a HashStore (behind a store that counts
// the calls each thread makes), real gloo and shm. The tests publish epochs as
// `commhost run --watch` does: straight into the store.
#include <atomic>
#include <chrono>
#include <thread>

#include "test_util.h"

namespace commhost::test {
namespace {

// Counts the calls made from threads that set `counting` (the ranks' calling threads
// while they are measured), not the poller's or the supervisor's.
thread_local bool counting = false;
class CountingStore final : public StoreBase {
 public:
  explicit CountingStore(StorePtr base) : base_(std::move(base)) {}
  using Store::wait;
  std::atomic<int64_t> calls{0};
  void set(const std::string& k, const Bytes& v) override { note(), base_->set(k, v); }
  Bytes get(const std::string& k) override { return note(), base_->get(k); }
  int64_t add(const std::string& k, int64_t d) override { return note(), base_->add(k, d); }
  Bytes compareSet(const std::string& k, const Bytes& e, const Bytes& d) override {
    return note(), base_->compareSet(k, e, d);
  }
  void wait(const std::vector<std::string>& k, std::chrono::milliseconds t) override { note(), base_->wait(k, t); }
  bool check(const std::vector<std::string>& k) override { return note(), base_->check(k); }
  bool deleteKey(const std::string& k) override { return note(), base_->deleteKey(k); }
  int64_t numKeys() override { return note(), base_->numKeys(); }
  void append(const std::string& k, const Bytes& v) override { note(), base_->append(k, v); }

 private:
  void note() {
    if (counting) calls.fetch_add(1);
  }
  StorePtr base_;
};

struct Job {
  std::shared_ptr<PluginRegistry> registry = testRegistry();
  std::shared_ptr<CountingStore> store = std::make_shared<CountingStore>(
      std::make_shared<HashStore>(std::chrono::seconds(20)));
  std::vector<std::shared_ptr<ProcessGroup>> groups;
  // `rank1Sets`: overrides rank 1 alone loads epochs with (a rank whose load fails).
  Job(const std::string& yaml, int world, std::vector<std::string> sets, std::vector<std::string> rank1Sets = {})
      : groups(world) {
    // As configFrom, and the groups remember the overrides to load epochs with them.
    ConfigOverrides overrides;
    overrides.set = std::move(sets);
    overrides.set.push_back("supervisor.flight_recorder.dump_dir=" + testDumpDir());
    overrides.fromEnvironment = false;
    auto config = std::make_shared<Config>(loadConfigText(yaml, "test.yaml", *registry, overrides));
    runRanks(world, [&](int r) {
      ProcessGroup::Setup setup{config, registry, store, r, world};
      setup.overrides = overrides;
      if (r == 1) setup.overrides.set.insert(setup.overrides.set.end(), rank1Sets.begin(), rank1Sets.end());
      groups[r] = ProcessGroup::create(setup);
    });
  }
  // What `commhost run --watch` writes for an edit.
  void publish(uint64_t epoch, const std::string& yaml) {
    const std::string prefix = "main/pending/" + std::to_string(epoch) + "/";
    store->set(prefix + "source", toBytes("epoch" + std::to_string(epoch) + ".yaml"));
    store->set(prefix + "yaml", toBytes(yaml));
    store->set("main/pending/epoch", toBytes(std::to_string(epoch)));
  }
};

// A training loop: syncPoint and one checked allreduce per step, until `epoch` is done on
// this rank and then `after` more steps (alike on every rank: all finish an epoch at the
// same sync count). Rank 0 publishes `yaml` as `epoch` at step 20. Returns the sync count
// at which this rank finished the epoch. Bounded: 50000 steps.
uint64_t loopUntilEpochDone(Job& job, ProcessGroup& pg, uint64_t epoch, const std::string& yaml, int after = 20) {
  uint64_t doneAt = 0;
  int left = after;
  for (int iter = 0; iter < 50000 && left > 0; ++iter) {
    if (pg.rank() == 0 && iter == 20) job.publish(epoch, yaml);
    pg.syncPoint();
    if (!doneAt && pg.syncStatus().epoch >= epoch) doneAt = pg.syncStatus().count;
    if (doneAt) --left;
    const uint64_t seq = pg.seq();
    checkedAllreduce(pg, iter);
    EXPECT_EQ(pg.seq(), seq + 1) << "seq numbers continue across the switch";
  }
  EXPECT_NE(doneAt, 0u) << "rank " << pg.rank() << " never finished epoch " << epoch;
  return doneAt;
}

TEST(SyncPoint, NothingPublishedCostsNoStoreCallAndChangesNothing) {
  Job job(kGloo, 2, {"group.sync_poll=5ms"});
  runRanks(2, [&](int r) {
    ProcessGroup& pg = *job.groups[r];
    checkedAllreduce(pg, 0);
    const uint64_t seq = pg.seq();
    counting = true;
    for (int i = 0; i < 2000; ++i) pg.syncPoint();
    // Long enough for the poller to have read the store many times meanwhile.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    for (int i = 0; i < 2000; ++i) pg.syncPoint();
    counting = false;
    EXPECT_EQ(pg.seq(), seq);
    EXPECT_EQ(pg.generation(), 0u);
    EXPECT_EQ(pg.syncStatus().count, 4000u);
    EXPECT_EQ(pg.syncStatus().epoch, 0u);
    checkedAllreduce(pg, 1);
  });
  EXPECT_EQ(job.store->calls.load(), 0) << "syncPoint() with nothing published made store calls";
}

TEST(SyncPoint, EpochPublishedMidLoopSwitchesEveryRankAtTheSameCount) {
  constexpr int kWorld = 3;
  Job job(kGloo, kWorld, {"group.sync_poll=10ms"});
  std::vector<uint64_t> doneAt(kWorld);
  runRanks(kWorld, [&](int r) {
    ProcessGroup& pg = *job.groups[r];
    doneAt[r] = loopUntilEpochDone(job, pg, 1, kShm);
    EXPECT_EQ(pg.generation(), 1u);
    EXPECT_EQ(pg.syncStatus().lastError, "");
    EXPECT_EQ(pg.routes().backendNames().size(), 2u) << "the shm config's routes";
    EXPECT_EQ(pg.config().source, "epoch1.yaml");
  });
  for (int r = 1; r < kWorld; ++r) EXPECT_EQ(doneAt[r], doneAt[0]) << "rank " << r << " switched at another step";
  EXPECT_GT(doneAt[0], 20u);
}

TEST(SyncPoint, InvalidEpochIsRejectedAndTheLoopGoesOnOnTheOldGeneration) {
  constexpr int kWorld = 3;
  Job job(kGloo, kWorld, {"group.sync_poll=10ms"});
  std::vector<uint64_t> doneAt(kWorld);
  runRanks(kWorld, [&](int r) {
    ProcessGroup& pg = *job.groups[r];
    doneAt[r] = loopUntilEpochDone(job, pg, 1, "backends: { gloo: { options: { threads: -3 } } }\n");
    EXPECT_EQ(pg.generation(), 0u);
    const std::string error = pg.syncStatus().lastError;
    EXPECT_NE(error.find("epoch 1 (epoch1.yaml) is invalid"), std::string::npos) << error;
    EXPECT_NE(error.find("threads"), std::string::npos) << "the config error itself: " << error;
    // The next epoch is applied as usual.
    loopUntilEpochDone(job, pg, 2, kShm);
    EXPECT_EQ(pg.generation(), 1u);
    EXPECT_EQ(pg.syncStatus().lastError, "");
  });
  for (int r = 1; r < kWorld; ++r) EXPECT_EQ(doneAt[r], doneAt[0]);
}

TEST(SyncPoint, ARankThatCannotLoadTheEpochRefusesItAndTheOthersDoNotWaitForTheTimeout) {
  constexpr int kWorld = 3;
  // Rank 1 loads epochs with an override that breaks shm's options: only it fails to load.
  Job job(kGloo, kWorld, {"group.sync_poll=10ms", "group.timeout=60s"}, {"backends.shm.options.chunk=-5"});
  std::vector<uint64_t> doneAt(kWorld);
  const auto start = std::chrono::steady_clock::now();
  runRanks(kWorld, [&](int r) {
    ProcessGroup& pg = *job.groups[r];
    doneAt[r] = loopUntilEpochDone(job, pg, 1, kShm);
    EXPECT_EQ(pg.generation(), 0u);
    const std::string error = pg.syncStatus().lastError;
    EXPECT_NE(error.find(r == 1 ? "epoch 1 (epoch1.yaml) is invalid" : "epoch 1 (epoch1.yaml) rolled back"),
              std::string::npos)
        << error;
    if (r != 1) {
      EXPECT_NE(error.find("the new config is invalid on rank(s) 1"), std::string::npos) << error;
    }
  });
  for (int r = 1; r < kWorld; ++r) EXPECT_EQ(doneAt[r], doneAt[0]);
  // The others learned of rank 1's refusal in the check phase, not at group.timeout (60 s).
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

TEST(SyncPoint, ARankThatLearnsTheSwitchPointAfterPassingItGetsAnError) {
  Job job(kGloo, 2, {"group.sync_poll=5ms", "group.timeout=2s"});
  ProcessGroup& pg0 = *job.groups[0];
  ProcessGroup& pg1 = *job.groups[1];
  // Rank 1 runs 100 steps ahead without a collective (what the margin cannot cover).
  for (int i = 0; i < 100; ++i) pg1.syncPoint();
  job.publish(1, kShm);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  const auto until = [&](ProcessGroup& pg, const std::string& key) {
    while (!pg.store()->check({key}) && std::chrono::steady_clock::now() < deadline) {
      pg.syncPoint();
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ASSERT_TRUE(pg.store()->check({key})) << key;
  };
  until(pg1, "sync/0/seen/1");    // rank 1 saw the epoch and said so
  until(pg0, "sync/0/decision");  // rank 0 decided: its own count + 2, far behind rank 1
  EXPECT_THROW_WITH(pg1.syncPoint(), InvalidArgument, "group main", "rank 1", "syncPoint", "epoch 1",
                    "switches at sync count", "call syncPoint() at every step boundary");
  EXPECT_EQ(pg1.generation(), 0u);
  // Rank 0 reconfigures alone at S: rank 1 never comes, the swap rolls back after group.timeout.
  for (int i = 0; i < 3 && pg0.syncStatus().epoch < 1; ++i) pg0.syncPoint();
  EXPECT_EQ(pg0.syncStatus().epoch, 1u);
  EXPECT_EQ(pg0.generation(), 0u);
  EXPECT_NE(pg0.syncStatus().lastError.find("rolled back"), std::string::npos) << pg0.syncStatus().lastError;
  EXPECT_NE(pg0.syncStatus().lastError.find("rank(s) 1"), std::string::npos) << pg0.syncStatus().lastError;
}

TEST(SyncPoint, GroupWithoutPollingStartsNoThread) {
  Job job(kGloo, 2, {});
  runRanks(2, [&](int r) {
    ProcessGroup& pg = *job.groups[r];
    if (r == 0) job.publish(1, kShm);
    for (int i = 0; i < 100; ++i) pg.syncPoint();
    EXPECT_EQ(pg.syncStatus().epoch, 0u) << "group.sync_poll is 0s: nothing reads the epoch key";
  });
}

}  // namespace
}  // namespace commhost::test
