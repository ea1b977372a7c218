// SPDX-License-Identifier: Apache-2.0
// One suite, every store: hash (in memory), tcp (real server on loopback), file, etcd
// (a real etcd child process; skipped where etcd is not installed), torch_tcp (torch's
// own TCPStore server; skipped where Debian's python3 has no torch).
#include "../host/test_util.h"
#include "store_fixtures.h"

namespace commhost::test {
namespace {

class StoreConformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "etcd" && !EtcdServer::missingReason().empty()) GTEST_SKIP() << EtcdServer::missingReason();
    if (GetParam() == "torch_tcp" && !TorchStoreServer::missingReason().empty())
      GTEST_SKIP() << TorchStoreServer::missingReason();
    fixture = makeFixture(GetParam());
  }
  std::unique_ptr<StoreFixture> fixture;
};

TEST_P(StoreConformance, EveryCall) {
  auto store = fixture->connect(std::chrono::milliseconds(300));
  store->set("a", toBytes("1"));
  EXPECT_EQ(toString(store->get("a")), "1");
  EXPECT_EQ(store->add("n", 5), 5);
  EXPECT_EQ(store->add("n", -7), -2);
  store->set("a", toBytes("not a number"));
  EXPECT_THROW_WITH(store->add("a", 1), Error, "'a'", "not an integer");
  EXPECT_EQ(toString(store->compareSet("c", {}, toBytes("v1"))), "v1");
  EXPECT_EQ(toString(store->compareSet("c", toBytes("x"), toBytes("v2"))), "v1");
  EXPECT_EQ(toString(store->compareSet("c", toBytes("v1"), toBytes("v2"))), "v2");
  EXPECT_EQ(toString(store->compareSet("absent", toBytes("x"), toBytes("y"))), "x");
  EXPECT_FALSE(store->check({"absent"}));
  store->append("log", toBytes("ab"));
  store->append("log", toBytes("cd"));
  EXPECT_EQ(toString(store->get("log")), "abcd");
  EXPECT_TRUE(store->check({"a", "c", "log"}));
  EXPECT_EQ(store->numKeys(), 4);  // a, n, c, log
  EXPECT_TRUE(store->deleteKey("a"));
  EXPECT_FALSE(store->deleteKey("a"));
  EXPECT_FALSE(store->check({"a"}));
  EXPECT_EQ(store->numKeys(), 3);
  store->multiSet({"m1", "m2"}, {toBytes("one"), toBytes("two")});
  const auto values = store->multiGet({"m2", "m1"});
  ASSERT_EQ(values.size(), 2u);
  EXPECT_EQ(toString(values[0]), "two");
  EXPECT_EQ(toString(values[1]), "one");
}

TEST_P(StoreConformance, WaitTimesOutNamingTheMissingKeys) {
  auto store = fixture->connect(std::chrono::milliseconds(200));
  store->set("here", toBytes("1"));
  EXPECT_THROW_WITH(store->wait({"here", "missing"}, std::chrono::milliseconds(100)), TimeoutError, "'missing'");
  EXPECT_THROW_WITH(store->get("never"), TimeoutError, "'never'");
  store->set("after", toBytes("still works"));
  EXPECT_EQ(toString(store->get("after")), "still works");
}

TEST_P(StoreConformance, WaitWakesOnAnotherClientsSet) {
  auto waiter = fixture->connect();
  auto setter = fixture->connect();
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    setter->set("k1", toBytes("x"));
    setter->set("k2", toBytes("y"));
  });
  waiter->wait({"k1", "k2"}, std::chrono::seconds(10));
  t.join();
  EXPECT_EQ(toString(waiter->get("k2")), "y");
}

TEST_P(StoreConformance, CompareSetHasOneWinner) {
  constexpr int kClients = 4;
  std::vector<StorePtr> clients;
  for (int i = 0; i < kClients; ++i) clients.push_back(fixture->connect());
  std::vector<std::string> seen(kClients);
  runRanks(kClients, [&](int r) {
    seen[r] = toString(clients[r]->compareSet("leader", {}, toBytes("rank" + std::to_string(r))));
  });
  for (int r = 0; r < kClients; ++r) EXPECT_EQ(seen[r], seen[0]);  // everyone saw the same winner
  EXPECT_EQ(toString(clients[0]->get("leader")), seen[0]);
}

TEST_P(StoreConformance, CountersExactUnderConcurrency) {
  constexpr int kClients = 4, kAdds = 200;
  std::vector<StorePtr> clients;
  for (int i = 0; i < kClients; ++i) clients.push_back(fixture->connect());
  runRanks(kClients, [&](int r) {
    for (int i = 0; i < kAdds; ++i) clients[r]->add("counter", 1);
  });
  EXPECT_EQ(clients[0]->add("counter", 0), kClients * kAdds);
}

TEST_P(StoreConformance, LargeBinaryAndEmptyValues) {
  auto store = fixture->connect();
  Bytes big(16 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 131 + (i >> 16));
  store->set("big", big);
  auto other = fixture->connect();
  EXPECT_EQ(other->get("big"), big);
  const std::string binaryKey("\0k\xffy", 4);
  store->set(binaryKey, Bytes{0, 0, 255});
  EXPECT_EQ(other->get(binaryKey), (Bytes{0, 0, 255}));
  EXPECT_FALSE(other->check({std::string("\0k", 2)}));
  store->set("", {});
  EXPECT_TRUE(other->check({""}));
  EXPECT_TRUE(other->get("").empty());
}

INSTANTIATE_TEST_SUITE_P(Stores, StoreConformance, ::testing::Values("hash", "tcp", "file", "etcd", "torch_tcp"),
                         [](const auto& info) { return info.param; });

// The torch_tcp store speaks the protocol of the torch that serves (1.13 on Debian 12, 2.6
// on Debian 13) and shares torch's key space: a key torch's own client set reads here,
// and a key set here reads back through a second, independently probed client.
TEST(TorchTcpStore, SpeaksTheServersProtocolAndSharesItsKeys) {
  if (!TorchStoreServer::missingReason().empty()) GTEST_SKIP() << TorchStoreServer::missingReason();
  TorchStoreServer server(/*seedVersion=*/true);
  torchtcp::TorchTcpStore store("127.0.0.1", server.port(), torchtcp::ProtocolChoice::Auto, std::chrono::seconds(10),
                                "test");
  const std::string version = toString(store.get("torch_version"));
  ASSERT_FALSE(version.empty());
  EXPECT_EQ(store.protocol(), version[0] == '1' ? torchtcp::Protocol::Torch1 : torchtcp::Protocol::Torch2) << version;
  // The other generation's protocol is refused by the server, loudly: never a wrong answer.
  const auto other = version[0] == '1' ? torchtcp::ProtocolChoice::Torch2 : torchtcp::ProtocolChoice::Torch1;
  torchtcp::TorchTcpStore wrong("127.0.0.1", server.port(), other, std::chrono::milliseconds(500), "test");
  EXPECT_THROW(wrong.get("torch_version"), Error);
  store.set("from_commhost", toBytes("hi"));
  torchtcp::TorchTcpStore second("127.0.0.1", server.port(), torchtcp::ProtocolChoice::Auto, std::chrono::seconds(10),
                                 "test");
  EXPECT_EQ(toString(second.get("from_commhost")), "hi");
}

TEST(FileStore, FileRemovedWhenTheLastUserCloses) {
  FileFixture fixture;
  {
    auto a = fixture.connect();
    auto b = fixture.connect();
    a->set("k", toBytes("v"));
    EXPECT_TRUE(boost::filesystem::exists(fixture.path()));
    a.reset();
    EXPECT_TRUE(boost::filesystem::exists(fixture.path()));
    EXPECT_EQ(toString(b->get("k")), "v");
  }
  EXPECT_FALSE(boost::filesystem::exists(fixture.path()));
}

TEST(FileStore, UnwritableDirectoryIsAClearError) {
  EXPECT_THROW_WITH(filestore::FileStore("/nonexistent-dir/x.store", std::chrono::seconds(1)), StoreError,
                    "/nonexistent-dir/x.store", "cannot open it");
}

}  // namespace
}  // namespace commhost::test
