// SPDX-License-Identifier: Apache-2.0
// What only the etcd store does: outlive a server restart, expire a dead process's
// heartbeat keys with its lease, keep jobs apart by prefix; and a shrink over it. Each test runs a real etcd
// (etcd_server.h) and is skipped where none is installed.
#include "../host/test_util.h"
#include "store_fixtures.h"

namespace commhost::test {
namespace {

using Millis = std::chrono::milliseconds;

class EtcdStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!EtcdServer::missingReason().empty()) GTEST_SKIP() << EtcdServer::missingReason();
  }
  static Millis since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration_cast<Millis>(std::chrono::steady_clock::now() - start);
  }
};

TEST_F(EtcdStoreTest, ServerKilledAndRestartedMidJob) {
  EtcdServer server;
  auto store = EtcdFixture::connectTo(server, "job/", Millis(400));
  store->set("before", toBytes("kept"));

  // A wait in flight when etcd dies ends by the deadline, with the endpoint named.
  std::thread killer([&] {
    std::this_thread::sleep_for(Millis(100));
    server.kill();
  });
  auto start = std::chrono::steady_clock::now();
  try {
    store->wait({"never"}, Millis(400));
    ADD_FAILURE() << "wait returned with etcd dead";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find(server.endpoint()), std::string::npos) << e.what();
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("'never'"), std::string::npos) << e.what();
  }
  killer.join();
  EXPECT_LT(since(start).count(), 1500);

  // Calls on a dead etcd fail by the timeout, saying what to do.
  start = std::chrono::steady_clock::now();
  const std::string endpoint = server.endpoint();
  EXPECT_THROW_WITH(store->set("k", toBytes("v")), StoreError, endpoint.c_str(), "refused the connection", "key 'k'",
                    "is etcd running");
  EXPECT_THROW_WITH(store->add("n", 1), StoreError, endpoint.c_str(), "key 'n'");
  EXPECT_LT(since(start).count(), 1500);

  // Back on the same data: the old handle and a new one both work, and nothing was lost.
  server.start();
  store->set("k", toBytes("v"));
  auto fresh = EtcdFixture::connectTo(server, "job/", Millis(400));
  EXPECT_EQ(toString(fresh->get("before")), "kept");
  EXPECT_EQ(toString(fresh->get("k")), "v");

  // A read or a put retries while etcd is briefly away: a restart within its timeout goes
  // unnoticed. (A txn whose connection drops after it was sent is an error instead: it
  // may have applied.)
  auto patient = EtcdFixture::connectTo(server, "job/", Millis(5000));
  server.kill();
  std::string problem;
  std::thread setter([&] {
    try {
      patient->set("during", toBytes("restart"));
    } catch (const std::exception& e) {
      problem = e.what();
    }
  });
  std::this_thread::sleep_for(Millis(200));
  server.start();  // from this thread: etcd dies with the thread that started it (PR_SET_PDEATHSIG)
  setter.join();
  EXPECT_EQ(problem, "");
  EXPECT_EQ(toString(patient->get("during")), "restart");
  EXPECT_EQ(patient->add("n", 2), 2);
}

TEST_F(EtcdStoreTest, NothingListeningIsAClearErrorAtCreation) {
  etcdstore::Settings s;
  s.endpoint = {"127.0.0.1", "1"};
  s.prefix = "x/";
  s.timeout = Millis(200);
  s.rank = 3;
  EXPECT_THROW_WITH(etcdstore::EtcdStore{s}, StoreError, "[rank 3]", "127.0.0.1:1", "refused the connection",
                    "store.options.endpoint");
}

TEST_F(EtcdStoreTest, HeartbeatKeysExpireWithTheirLease) {
  // A server of its own: the shared one may still be busy with the conformance suite's
  // 16 MiB values, and a slow keepalive would end the lease this test expects to live.
  EtcdServer server;
  const std::string beat = "main/0/supervisor/heartbeat/1";
  // A 2 s TTL renewed every 0.5 s, calls allowed 2 s: a keepalive delayed by a busy
  // machine (CI runs two tests at once on two cores) still lands before the lease ends.
  auto watcher = EtcdFixture::connectTo(server, "lease/", Millis(2000), 2);
  {
    auto rank = EtcdFixture::connectTo(server, "lease/", Millis(2000), 2);
    EXPECT_EQ(rank->add(beat, 1), 1);
    rank->set("main/0/plain", toBytes("stays"));
    // A watcher reading a peer's absent heartbeat does not create it (on its own lease).
    EXPECT_EQ(watcher->add("main/0/supervisor/heartbeat/2", 0), 0);
    EXPECT_FALSE(watcher->check({"main/0/supervisor/heartbeat/2"}));
    // The keepalive thread holds the key past its TTL while the process lives: twice the
    // TTL, so an unrenewed lease is surely gone (etcd revokes expired leases lazily, and a
    // key outlived its 2 s lease by 0.6 s in most runs while every renewal failed).
    std::this_thread::sleep_for(Millis(4000));
    EXPECT_EQ(watcher->add(beat, 0), 1);
  }  // the rank's process "dies": no more keepalives (the lease is not revoked)
  const auto start = std::chrono::steady_clock::now();
  while (watcher->check({beat}) && since(start) < Millis(10000)) std::this_thread::sleep_for(Millis(50));
  EXPECT_FALSE(watcher->check({beat})) << "the dead rank's heartbeat key outlived its lease";
  EXPECT_TRUE(watcher->check({"main/0/plain"})) << "a key not on the lease expired";
}

TEST(EtcdLease, EveryTtlLeavesARenewalTime) {
  // A third of the TTL for each keepalive, also for the shortest TTLs (lease_ttl_s allows
  // 1): whole seconds / 3 gave 1 and 2 s TTLs no time, and keys expired while alive.
  EXPECT_EQ(etcdstore::LeaseKeeper::renewalBudget(1), Millis(333));
  EXPECT_EQ(etcdstore::LeaseKeeper::renewalBudget(2), Millis(666));
  EXPECT_EQ(etcdstore::LeaseKeeper::renewalBudget(10), Millis(3333));
}

TEST_F(EtcdStoreTest, PrefixesKeepJobsApart) {
  auto& server = EtcdFixture::server();
  auto a = EtcdFixture::connectTo(server, "jobA/", Millis(300));
  auto b = EtcdFixture::connectTo(server, "jobB/", Millis(300));
  a->set("rank0/addr", toBytes("A"));
  b->set("rank0/addr", toBytes("B"));
  EXPECT_EQ(a->add("count", 5), 5);
  EXPECT_EQ(b->add("count", 1), 1);
  EXPECT_EQ(toString(a->get("rank0/addr")), "A");
  EXPECT_EQ(toString(b->get("rank0/addr")), "B");
  EXPECT_EQ(a->numKeys(), 2);
  EXPECT_EQ(b->numKeys(), 2);
  EXPECT_TRUE(a->deleteKey("rank0/addr"));
  EXPECT_TRUE(b->check({"rank0/addr"}));
  a->set("only-a", toBytes("1"));
  EXPECT_THROW_WITH(b->wait({"only-a"}, Millis(100)), TimeoutError, "'only-a'", "jobB/");
}

TEST_F(EtcdStoreTest, ValueOverTheRequestLimitNamesTheFlag) {
  EtcdServer server(1 << 20);  // a 1 MiB limit of its own, so the refused value stays small
  auto store = EtcdFixture::connectTo(server, "big/", Millis(5000));
  const Bytes huge(2u << 20, 7);
  EXPECT_THROW_WITH(store->set("huge", huge), StoreError, "key 'huge'", "--max-request-bytes");
  EXPECT_FALSE(store->check({"huge"}));
}

// Elastic membership over etcd: a shrink round's agreement keys (alive, decision, built)
// go through etcd's transactions and the heartbeat keys through its lease, as through the
// tcp store. A rank alive but too late is removed; the survivors renumber and go on.
TEST_F(EtcdStoreTest, ShrinkRenumbersTheSurvivors) {
  EtcdFixture fixture;
  constexpr int kWorld = 3;
  auto registry = testRegistry();
  auto config = configFrom(kGloo, *registry);
  // One client per rank, made here: etcd starts with the first, and dies with the thread
  // that started it (etcd_server.h).
  std::vector<StorePtr> stores;
  for (int r = 0; r < kWorld; ++r) stores.push_back(fixture.connect(std::chrono::seconds(20)));
  std::vector<std::shared_ptr<ProcessGroup>> groups(kWorld);
  runRanks(kWorld, [&](int r) { groups[r] = ProcessGroup::create({config, registry, stores[r], r, kWorld}); });
  runRanks(kWorld, [&](int r) {
    ProcessGroup& pg = *groups[r];
    checkedAllreduce(pg, 0);
    if (r == 1) {
      std::this_thread::sleep_for(Millis(3000));  // alive, but the others decide without it
      EXPECT_THROW_WITH(pg.shrink(shrinkWithin(Millis(1000))), AbortedError, "removed from group");
      return;
    }
    const ShrinkReport report = pg.shrink(shrinkWithin(Millis(1000)));
    EXPECT_EQ(report.worldSize, 2);
    EXPECT_EQ(report.removed, std::vector<int>{1});
    EXPECT_EQ(report.generation, 1u);
    EXPECT_EQ(pg.rank(), r == 0 ? 0 : 1);
    EXPECT_EQ(pg.globalRanks(), (std::vector<int>{0, 2}));
    checkedAllreduce(pg, 1);
  });
}

}  // namespace
}  // namespace commhost::test
