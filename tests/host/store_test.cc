// SPDX-License-Identifier: Apache-2.0
#include "test_util.h"

namespace commhost::test {
namespace {

TEST(HashStore, BasicCalls) {
  HashStore store(std::chrono::milliseconds(100));
  store.set("a", toBytes("1"));
  EXPECT_EQ(toString(store.get("a")), "1");
  EXPECT_EQ(store.add("n", 5), 5);
  EXPECT_EQ(store.add("n", -2), 3);
  store.set("a", toBytes("x"));
  EXPECT_THROW_WITH(store.add("a", 1), InvalidArgument, "key 'a'", "not an integer");
  EXPECT_EQ(toString(store.compareSet("c", {}, toBytes("v1"))), "v1");
  EXPECT_EQ(toString(store.compareSet("c", toBytes("wrong"), toBytes("v2"))), "v1");
  EXPECT_EQ(toString(store.compareSet("c", toBytes("v1"), toBytes("v2"))), "v2");
  store.append("log", toBytes("ab"));
  store.append("log", toBytes("cd"));
  EXPECT_EQ(toString(store.get("log")), "abcd");
  EXPECT_TRUE(store.check({"a", "c"}));
  EXPECT_FALSE(store.check({"a", "missing"}));
  EXPECT_TRUE(store.deleteKey("a"));
  EXPECT_FALSE(store.deleteKey("a"));
  EXPECT_EQ(store.numKeys(), 3);
  store.multiSet({"m1", "m2"}, {toBytes("1"), toBytes("2")});
  auto values = store.multiGet({"m2", "m1"});
  EXPECT_EQ(toString(values[0]), "2");
  EXPECT_THROW_WITH(store.get("never"), TimeoutError, "'never'");
}

TEST(HashStore, BinarySafeKeysAndValues) {
  HashStore store;
  const std::string key("k\0ey", 4);
  Bytes value = {0, 255, 0, 10};
  store.set(key, value);
  EXPECT_EQ(store.get(key), value);
  EXPECT_FALSE(store.check({"k"}));
  store.set("", {});
  EXPECT_TRUE(store.get("").empty());
}

TEST(HashStore, WaitWakesOnSetFromAnotherThread) {
  HashStore store;
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    store.set("late", toBytes("here"));
  });
  store.wait({"late"}, std::chrono::seconds(5));
  setter.join();
  EXPECT_EQ(toString(store.get("late")), "here");
}

TEST(HashStore, CountersExactUnderThreads) {
  auto store = std::make_shared<HashStore>();
  runRanks(4, [&](int) {
    for (int i = 0; i < 500; ++i) store->add("counter", 1);
  });
  EXPECT_EQ(store->add("counter", 0), 2000);
}

TEST(PrefixStore, IsolatesAndNests) {
  auto base = std::make_shared<HashStore>(std::chrono::milliseconds(50));
  auto a = std::make_shared<PrefixStore>("a", base);
  auto ab = std::make_shared<PrefixStore>("b", a);
  ab->set("k", toBytes("v"));
  EXPECT_EQ(toString(base->get("a/b/k")), "v");
  EXPECT_FALSE(a->check({"k"}));
  EXPECT_EQ(ab->add("n", 2), 2);
  EXPECT_EQ(toString(ab->multiGet({"k"})[0]), "v");
  EXPECT_TRUE(ab->deleteKey("k"));
  EXPECT_THROW_WITH(ab->get("gone"), TimeoutError, "a/b/gone");
  EXPECT_THROW(PrefixStore("x", nullptr), InvalidArgument);
}

}  // namespace
}  // namespace commhost::test
