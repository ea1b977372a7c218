// SPDX-License-Identifier: Apache-2.0
// ProcessGroup::reconfigure (hot swap): ranks as threads over a HashStore, real gloo, shm
// and test plugins (failrank: a storecoll backend whose factory fails or is slow on one rank).
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace commhost::test {
namespace {

// gloo with another option: rebuilt, not kept.
constexpr const char* kShmGloo2 =
    "group: { timeout: 20s }\n"
    "backends: { gloo: { options: { threads: 2, contexts: 1 } }, shm: { options: { chunk: 4096 } } }\n"
    "routes: [{ device: cpu, backend: [shm, gloo] }]\n";

std::string failrankConfig(const std::string& options) {
  return "group: { timeout: 20s }\n"
         "backends: { gloo: { options: { threads: 1, contexts: 1 } }, fr: { plugin: failrank, options: " +
         options +
         " } }\n"
         "routes: [{ device: cpu, backend: gloo }, { device: cpu, op: allreduce, backend: fr }]\n";
}

struct Job {
  std::shared_ptr<PluginRegistry> registry = testRegistry();
  std::shared_ptr<HashStore> store = std::make_shared<HashStore>(std::chrono::seconds(20));
  std::vector<std::shared_ptr<ProcessGroup>> groups;
  std::shared_ptr<const Config> load(const std::string& yaml) { return configFrom(yaml, *registry); }
  Job(const std::string& yaml, int world) : groups(world) {
    auto config = load(yaml);
    runRanks(world, [&](int r) { groups[r] = ProcessGroup::create({config, registry, store, r, world}); });
  }
};

TEST(Reconfigure, SwapsGlooAndShmUnderAnAllreduceLoop) {
  constexpr int kWorld = 3;
  Job job(kGloo, kWorld);
  auto gloo = job.load(kGloo), shm = job.load(kShm);
  runRanks(kWorld, [&](int r) {
    ProcessGroup& pg = *job.groups[r];
    uint64_t generation = 0;
    for (int iter = 0; iter < 40; ++iter) {
      if (iter % 5 == 4) {
        const uint64_t seqBefore = pg.seq();
        const bool toShm = (iter / 5) % 2 == 0;
        const auto report = pg.reconfigure(toShm ? shm : gloo);
        EXPECT_EQ(report.generation, ++generation);
        EXPECT_EQ(pg.generation(), generation);
        EXPECT_EQ(pg.seq(), seqBefore) << "a swap issues no collective";
        EXPECT_EQ(report.kept, std::vector<std::string>{"gloo"});
        EXPECT_EQ(toShm ? report.built : report.removed, std::vector<std::string>{"shm"});
        EXPECT_EQ(pg.routes().backendNames().size(), toShm ? 2u : 1u);
      }
      const uint64_t seq = pg.seq();
      checkedAllreduce(pg, iter);
      EXPECT_EQ(pg.seq(), seq + 1) << "seq numbers continue across swaps";
    }
  });
}

TEST(Reconfigure, KeepsTheSameObjectForAnUnchangedEntry) {
  Job job(kShm, 2);
  auto other = job.load(kShmGloo2);
  runRanks(2, [&](int r) {
    ProcessGroup& pg = *job.groups[r];
    Backend* shmBefore = &pg.backend("shm");
    Backend* glooBefore = &pg.backend("gloo");
    const auto report = pg.reconfigure(other);
    EXPECT_EQ(report.kept, std::vector<std::string>{"shm"});
    EXPECT_EQ(report.built, std::vector<std::string>{"gloo"});
    EXPECT_EQ(report.removed, std::vector<std::string>{"gloo"});
    EXPECT_EQ(&pg.backend("shm"), shmBefore) << "an unchanged entry keeps its backend object";
    (void)glooBefore;
    checkedAllreduce(pg, 1);
  });
}

TEST(Reconfigure, OneRanksFailingBackendRollsBackEveryRank) {
  constexpr int kWorld = 3;
  Job job(kGloo, kWorld);
  auto failing = job.load(failrankConfig("{ fail_rank: 1 }"));
  auto working = job.load(failrankConfig("{ fail_rank: -1 }"));
  runRanks(kWorld, [&](int r) {
    ProcessGroup& pg = *job.groups[r];
    checkedAllreduce(pg, 0);
    const auto start = std::chrono::steady_clock::now();
    EXPECT_THROW_WITH(pg.reconfigure(failing), PluginError, "reconfigure", "rank(s) 1", "failrank was told to fail",
                      "every rank keeps generation 0");
    // The others stopped their rendezvous when rank 1 reported, not at the 20 s timeout.
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
    EXPECT_EQ(pg.generation(), 0u);
    EXPECT_EQ(pg.routes().backendNames(), std::vector<std::string>{"gloo"});
    for (int iter = 1; iter < 5; ++iter) checkedAllreduce(pg, iter);  // still on the old config
    const auto report = pg.reconfigure(working);                      // a later attempt works
    EXPECT_EQ(report.generation, 1u);
    EXPECT_EQ(report.built, std::vector<std::string>{"fr"});
    for (int iter = 5; iter < 8; ++iter) checkedAllreduce(pg, iter);
  });
}

TEST(Reconfigure, RefusesConfigsThatDifferOnOneRank) {
  constexpr int kWorld = 3;
  Job job(kGloo, kWorld);
  auto shm = job.load(kShm), other = job.load(kShmGloo2);
  const std::string otherHash = std::to_string(other->hash), shmHash = std::to_string(shm->hash);
  runRanks(kWorld, [&](int r) {
    ProcessGroup& pg = *job.groups[r];
    EXPECT_THROW_WITH(pg.reconfigure(r == 2 ? other : shm), ConfigError, "rank 2 loaded", otherHash.c_str(),
                      shmHash.c_str(), "every rank keeps generation 0");
    EXPECT_EQ(pg.generation(), 0u);
    checkedAllreduce(pg, 0);
  });
}

// A swap to a config whose route list names a backend that cannot run on some rank: the
// ranks would resolve the list differently, so every rank refuses the attempt. (The ranks
// here share one registry; another rank's different view is put in the store, as that
// rank would.)
TEST(Reconfigure, RanksThatDifferInWhichListedBackendsCanRunRefuseTheSwap) {
  Job job(kGloo, 1);
  auto next = job.load(
      "group: { timeout: 20s }\nbackends: { gloo: { options: { threads: 1, contexts: 1 } }, mine: { plugin: probedcpu "
      "} }\n"
      "routes: [{ device: cpu, backend: [mine, gloo] }]\n");
  job.store->compareSet("main/1/swap/1/unavailable", {}, toBytes("- rank 1"));
  ProcessGroup& pg = *job.groups[0];
  EXPECT_THROW_WITH(pg.reconfigure(next), ConfigError, "ranks differ in which backends can run",
                    "not 'mine': no CUDA device visible", "every rank keeps generation 0");
  EXPECT_EQ(pg.generation(), 0u);
  checkedAllreduce(pg, 0);
}

TEST(Reconfigure, WaitsForASlowRank) {
  constexpr int kWorld = 3;
  Job job(kGloo, kWorld);
  auto slow = job.load(failrankConfig("{ slow_rank: 2, delay: 300ms }"));
  runRanks(kWorld, [&](int r) {
    ProcessGroup& pg = *job.groups[r];
    if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));  // late to the check too
    EXPECT_EQ(pg.reconfigure(slow).generation, 1u);
    for (int iter = 0; iter < 3; ++iter) checkedAllreduce(pg, iter);
  });
}

// A backend keeps the store it was built with: its waits after the swap (here a rank late
// by several of the store's wait slices) must still work once reconfigure() returned.
TEST(Reconfigure, ABackendUsesItsSwapStoreAfterTheSwap) {
  constexpr int kWorld = 2;
  Job job(kGloo, kWorld);
  auto storecoll = job.load(failrankConfig("{ fail_rank: -1 }"));
  runRanks(kWorld, [&](int r) {
    ProcessGroup& pg = *job.groups[r];
    pg.reconfigure(storecoll);
    for (int iter = 0; iter < 3; ++iter) {
      if (r == iter % kWorld) std::this_thread::sleep_for(std::chrono::milliseconds(200));
      checkedAllreduce(pg, iter);
    }
  });
}

TEST(Reconfigure, ARankThatNeverComesIsNamedWithinTheTimeout) {
  constexpr int kWorld = 3;
  Job job(kGloo, kWorld);
  auto shm = job.load(kShm);
  runRanks(kWorld, [&](int r) {
    if (r == 1) return;  // never calls reconfigure
    ReconfigureOptions options;
    options.timeout = std::chrono::milliseconds(500);
    EXPECT_THROW_WITH(job.groups[r]->reconfigure(shm, options), TimeoutError, "rank(s) 1 did not reach the check");
    EXPECT_EQ(job.groups[r]->generation(), 0u);
  });
}

// A HashStore whose writes of one rank's swap report arrive late (a rank descheduled or
// on a slow link between reporting and the others' deadline).
class LateReportStore : public StoreBase {
 public:
  explicit LateReportStore(std::string suffix) : StoreBase(std::chrono::seconds(20)), suffix_(std::move(suffix)) {}
  std::atomic<bool> late{true};
  void set(const std::string& key, const Bytes& value) override {
    if (late && key.find("swap/") != std::string::npos && key.size() >= suffix_.size() &&
        key.compare(key.size() - suffix_.size(), suffix_.size(), suffix_) == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    base_.set(key, value);
  }
  Bytes get(const std::string& key) override { return base_.get(key); }
  int64_t add(const std::string& key, int64_t delta) override { return base_.add(key, delta); }
  Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    return base_.compareSet(key, expected, desired);
  }
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    base_.wait(keys, timeout);
  }
  bool check(const std::vector<std::string>& keys) override { return base_.check(keys); }
  bool deleteKey(const std::string& key) override { return base_.deleteKey(key); }
  int64_t numKeys() override { return base_.numKeys(); }
  void append(const std::string& key, const Bytes& value) override { base_.append(key, value); }

 private:
  HashStore base_{std::chrono::seconds(20)};
  std::string suffix_;
};

TEST(Reconfigure, AReportLateForOneRankRollsBackEveryRankNotJustThatOne) {
  constexpr int kWorld = 2;
  auto registry = testRegistry();
  auto store = std::make_shared<LateReportStore>("/report/1");
  std::vector<std::shared_ptr<ProcessGroup>> groups(kWorld);
  runRanks(kWorld, [&](int r) {
    groups[r] = ProcessGroup::create({configFrom(kGloo, *registry), registry, store, r, kWorld});
  });
  auto shm = configFrom(kShm, *registry);
  runRanks(kWorld, [&](int r) {
    ReconfigureOptions options;
    options.timeout = std::chrono::milliseconds(400);
    // Rank 0 gives up waiting for rank 1's report; rank 1 then finds every report ok but
    // must follow the decision already taken.
    if (r == 0)
      EXPECT_THROW_WITH(groups[r]->reconfigure(shm, options), TimeoutError, "rank(s) 1 did not reach the report phase",
                        "every rank keeps generation 0");
    else
      EXPECT_THROW_WITH(groups[r]->reconfigure(shm, options), TimeoutError,
                        "every rank reported success here, but another rank had already decided to roll back",
                        "rank 0: rank(s) 1 did not reach the report phase");
    EXPECT_EQ(groups[r]->generation(), 0u);
    checkedAllreduce(*groups[r], 0);  // both still on gloo, together
  });
  store->late = false;
  runRanks(kWorld, [&](int r) {
    EXPECT_EQ(groups[r]->reconfigure(shm).generation, 1u);
    checkedAllreduce(*groups[r], 1);
  });
}

// One rank's view of a store whose server dies right after `decider` wrote the swap's
// decision (the rank serving a tcp store killed after the outcome vote): the decider
// learns "commit", every other rank's outcome write fails, as does any later call.
class DyingStore : public StoreBase {
 public:
  struct Death {
    std::atomic<bool> dead{false};
    std::mutex mutex;
    std::condition_variable died;
  };
  DyingStore(std::shared_ptr<HashStore> base, std::shared_ptr<Death> death, bool decider)
      : StoreBase(std::chrono::seconds(20)), base_(std::move(base)), death_(std::move(death)), decider_(decider) {}
  Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    if (key.size() < 8 || key.compare(key.size() - 8, 8, "/outcome") != 0)
      return live().compareSet(key, expected, desired);
    if (decider_) {
      Bytes decided = live().compareSet(key, expected, desired);
      std::lock_guard<std::mutex> lock(death_->mutex);
      death_->dead = true;
      death_->died.notify_all();
      return decided;
    }
    std::unique_lock<std::mutex> lock(death_->mutex);
    death_->died.wait_for(lock, std::chrono::seconds(10), [&] { return death_->dead.load(); });
    return live().compareSet(key, expected, desired);
  }
  void set(const std::string& key, const Bytes& value) override { live().set(key, value); }
  Bytes get(const std::string& key) override { return live().get(key); }
  int64_t add(const std::string& key, int64_t delta) override { return live().add(key, delta); }
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    live().wait(keys, timeout);
  }
  bool check(const std::vector<std::string>& keys) override { return live().check(keys); }
  bool deleteKey(const std::string& key) override { return live().deleteKey(key); }
  int64_t numKeys() override { return live().numKeys(); }
  void append(const std::string& key, const Bytes& value) override { live().append(key, value); }

 private:
  HashStore& live() {
    if (death_->dead) throw StoreError("connection to the store server reset by peer");
    return *base_;
  }
  std::shared_ptr<HashStore> base_;
  std::shared_ptr<Death> death_;
  bool decider_;
};

TEST(Reconfigure, ARankThatCannotReadTheDecisionAbortsInsteadOfRollingBackAlone) {
  constexpr int kWorld = 3, kDecider = 1;
  auto registry = testRegistry();
  auto base = std::make_shared<HashStore>(std::chrono::seconds(20));
  auto death = std::make_shared<DyingStore::Death>();
  std::vector<std::shared_ptr<ProcessGroup>> groups(kWorld);
  runRanks(kWorld, [&](int r) {
    auto store = std::make_shared<DyingStore>(base, death, r == kDecider);
    groups[r] = ProcessGroup::create({configFrom(kGloo, *registry), registry, store, r, kWorld});
  });
  auto shm = configFrom(kShm, *registry);
  runRanks(kWorld, [&](int r) {
    if (r == kDecider) {
      EXPECT_EQ(groups[r]->reconfigure(shm).generation, 1u);
      return;
    }
    // Rolling back here would leave this rank on generation 0 beside a rank on 1.
    EXPECT_THROW_WITH(groups[r]->reconfigure(shm), StoreError, "could not read the swap's decision from the store",
                      "reset by peer", "may have committed generation 1", "the group is aborted on this rank",
                      "restart the job");
    Tensor t = Tensor::empty({4}, DType::Float32);
    EXPECT_THROW_WITH(groups[r]->allreduce(t)->wait(), AbortedError, "could not read the swap's decision");
  });
  death->dead = false;  // the store is back for the groups' teardown
}

TEST(Reconfigure, SwapsASubgroupAlone) {
  constexpr int kWorld = 4;
  Job job(kGloo, kWorld);
  auto shm = job.load(kShm);
  runRanks(kWorld, [&](int r) {
    ProcessGroup& world = *job.groups[r];
    auto sub = world.newGroup({1, 2});
    if (sub) {
      EXPECT_EQ(sub->reconfigure(shm).generation, 1u);
      for (int iter = 0; iter < 3; ++iter) checkedAllreduce(*sub, iter);
      EXPECT_EQ(sub->routes().backendNames().size(), 2u);
    }
    EXPECT_EQ(world.generation(), 0u);
    for (int iter = 0; iter < 3; ++iter) checkedAllreduce(world, iter);
  });
}

TEST(Reconfigure, FlightRecorderShowsGenerationsAndSwaps) {
  Job job(kGloo, 2);
  auto shm = job.load(kShm);
  runRanks(2, [&](int r) {
    checkedAllreduce(*job.groups[r], 0);
    job.groups[r]->reconfigure(shm);
    checkedAllreduce(*job.groups[r], 1);
  });
  std::ifstream in(dumpFlightRecorder("test"));
  const auto dump = nlohmann::json::parse(in);
  std::vector<std::pair<uint64_t, std::string>> seen;
  for (const auto& e : dump["entries"]) seen.emplace_back(e["generation"], e["backend"]);
  EXPECT_NE(std::find(seen.begin(), seen.end(), std::make_pair(uint64_t{0}, std::string("gloo"))), seen.end());
  EXPECT_NE(std::find(seen.begin(), seen.end(), std::make_pair(uint64_t{1}, std::string("shm"))), seen.end());
  ASSERT_EQ(dump["swaps"].size(), 2u);  // one per rank (threads share the process's recorder)
  for (const auto& s : dump["swaps"]) {
    EXPECT_EQ(s["outcome"], "committed");
    EXPECT_EQ(s["to_generation"], 1);
    EXPECT_EQ(s["built"], nlohmann::json::array({"shm"}));
    EXPECT_GE(s["total_us"].get<int64_t>(), s["build_us"].get<int64_t>());
  }
}

// Swaps that build and destroy gloo and shm each time leave no fd, thread, segment, store
// key or memory behind.
TEST(Reconfigure, AThousandSwapsLeakNothing) {
  constexpr int kWorld = 2, kSwaps = 1000, kWarmup = 20;
  Job job(kGloo, kWorld);
  auto a = job.load(kGloo), b = job.load(kShmGloo2);
  size_t fds = 0, threads = 0, segments = 0;
  int64_t keys = 0;
  long rss = 0;
  const auto swapAll = [&](int from, int to) {
    runRanks(kWorld, [&](int r) {
      for (int i = from; i < to; ++i) {
        job.groups[r]->reconfigure(i % 2 == 0 ? b : a);
        if (i % 50 == 0) checkedAllreduce(*job.groups[r], i);
      }
    });
  };
  swapAll(0, kWarmup);
  fds = countEntries("/proc/self/fd");
  threads = countEntries("/proc/self/task");
  segments = ourSegments().size();
  rss = residentKiB();
  keys = job.store->numKeys();
  swapAll(kWarmup, kSwaps);
  // The protocol's keys and the backends' rendezvous keys of each attempt go once every
  // rank is past it: the store holds about one attempt's worth, whatever the count.
  EXPECT_LE(job.store->numKeys(), keys + 8) << "store keys grew from " << keys << " to " << job.store->numKeys();
  EXPECT_LE(countEntries("/proc/self/fd"), fds + 2);
  EXPECT_LE(countEntries("/proc/self/task"), threads + 2);
  EXPECT_LE(ourSegments().size(), segments);  // this process's: other tests may run at once
  // The store keeps the backends' rendezvous keys of every attempt (a few hundred bytes
  // each); anything per-swap beyond that would show here. Not under AddressSanitizer,
  // whose quarantine holds freed memory by design (256 MiB); its leak check covers that run.
#if defined(__SANITIZE_ADDRESS__)
  return;
#endif
  EXPECT_LT(residentKiB() - rss, 32 * 1024) << "resident memory grew by " << (residentKiB() - rss) << " KiB";
}

}  // namespace
}  // namespace commhost::test
