// SPDX-License-Identifier: Apache-2.0
// KeyLedger (group/key_ledger.h): the keys a rank wrote in a generation's store, swept once
// every member is past it, and a manifest through which the members sweep a gone rank's.
#include <gtest/gtest.h>

#include "commhost/store.h"
#include "group/key_ledger.h"

namespace commhost::test {
namespace {

TEST(KeyLedger, SweepsEveryKeyThisRankWroteExceptThoseKept) {
  auto job = std::make_shared<HashStore>();
  job->set("other/key", toBytes("a key of another generation"));
  KeyLedger ledger(std::make_shared<PrefixStore>("g/1", job));
  ledger.set("a", toBytes("1"));
  ledger.add("b", 2);
  ledger.compareSet("member/3/decision", {}, toBytes("0,1"));
  ledger.append("d", toBytes("x"));
  ledger.multiSet({"e", "f"}, {toBytes("5"), toBytes("6")});
  ledger.set("gone", toBytes("deleted through the ledger: forgotten"));
  EXPECT_TRUE(ledger.deleteKey("gone"));
  ledger.get("a");  // reads record nothing
  EXPECT_EQ(ledger.size(), 6u);
  EXPECT_EQ(job->numKeys(), 7);
  const size_t deleted = ledger.sweep([](const std::string& key) { return key == "member/3/decision"; });
  EXPECT_EQ(deleted, 5u);
  EXPECT_EQ(ledger.size(), 1u) << "a kept key stays in the ledger";
  EXPECT_TRUE(job->check({"g/1/member/3/decision", "other/key"}));
  EXPECT_EQ(job->numKeys(), 2) << "only the kept key and the other generation's are left";
}

TEST(KeyLedger, AManifestLetsTheMembersSweepWhatAGoneRankWrote) {
  auto job = std::make_shared<HashStore>();
  auto gen = std::make_shared<PrefixStore>("g/1/m4", job);
  KeyLedger gone(gen), member(gen);
  gone.set("backend/gloo/rank_2", toBytes("addr"));
  gone.add("supervisor/heartbeat/2", 1);
  gone.publishManifest(7);  // global rank 7
  member.set("backend/gloo/rank_0", toBytes("addr"));
  member.adoptManifest(7);
  member.adoptManifest(9);  // published none: nothing to adopt
  EXPECT_EQ(member.size(), 4u) << "its own key, the gone rank's two and the manifest";
  member.sweep([](const std::string&) { return false; });
  EXPECT_EQ(job->numKeys(), 0);
}

}  // namespace
}  // namespace commhost::test
