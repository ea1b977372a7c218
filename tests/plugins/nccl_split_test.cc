// SPDX-License-Identifier: Apache-2.0
// The nccl backend's subgroup bookkeeping (plugins/nccl/split.h), without a GPU: each
// rank's vote, the rule every rank applies to the votes, the agreement itself (ranks as
// threads over a HashStore, as the parent backend's private store), what each rank passes
// to ncclCommSplit, and that NCCL's ordering of the new communicator matches the host's.
#include <algorithm>
#include <map>

#include "../host/test_util.h"
#include "split.h"
#include "unique_id.h"

namespace commhost::test {
namespace {

using namespace commhost::nccl_backend;

// A parent backend's context as the host fills it: rank `rank` of `world`, its private
// store a prefix of the job's store.
BackendContext parentContext(const std::shared_ptr<HashStore>& store, int rank, int world,
                             std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  BackendContext ctx;
  ctx.groupName = "main";
  ctx.backendName = "nccl";
  ctx.rank = rank;
  ctx.worldSize = world;
  ctx.store = std::make_shared<PrefixStore>("main/1/backend/nccl", store);
  ctx.timeout = timeout;
  return ctx;
}

// A SplitRequest as the host fills it for rank `rank` of a parent group.
SplitRequest memberRequest(const char* op, const std::string& round, const std::string& group, int color,
                           const std::vector<int>& members, int rank) {
  SplitRequest r;
  r.op = op;
  r.round = round;
  r.group = group;
  r.color = color;
  r.members = members;
  r.rank = static_cast<int>(std::find(members.begin(), members.end(), rank) - members.begin());
  return r;
}
SplitRequest otherRequest(const char* op, const std::string& round) {
  SplitRequest r;
  r.op = op;
  r.round = round;
  return r;
}

TEST(NcclSplitRule, ChildIdsNameEachCommunicatorOfARound) {
  // Alike for the members of one color, apart across colors, rounds and fresh communicators.
  EXPECT_EQ(splitChildId("split2", 1), splitChildId("split2", 1));
  EXPECT_NE(splitChildId("split2", 1), splitChildId("split2", 0));
  EXPECT_NE(splitChildId("split2", 1), splitChildId("split3", 1));
  EXPECT_NE(splitChildId("sub1", 0).find("sub1"), std::string::npos);
  for (int d = 0; d < 8; ++d) EXPECT_NE(splitChildId("sub1", 0), uniqueIdKey(d));
}

TEST(NcclSplitRule, SplitOnlyWhenEveryRankNamesTheSameCommunicator) {
  const std::string k0 = uniqueIdKey(0), k1 = uniqueIdKey(1);
  EXPECT_EQ(agreedParent({k0, k0, k0, k0}), k0);
  EXPECT_EQ(agreedParent({k1}), k1);
  EXPECT_EQ(agreedParent({k0, k0, "", k0}), "");  // one rank has none (no eager_init, no op yet)
  EXPECT_EQ(agreedParent({"", "", ""}), "");
  EXPECT_EQ(agreedParent({k0, k1, k0}), "");  // another current device: another communicator
  EXPECT_EQ(agreedParent({}), "");
}

TEST(NcclSplitRule, MembersPassTheirColorAndSubgroupRankOthersNoColor) {
  const ErrorContext where{"main", 1, "split"};
  const SplitCall member = splitCall(memberRequest("split", "split2", "main/split2c5", 5, {3, 1}, 1), where);
  EXPECT_EQ(member.color, 5);
  EXPECT_EQ(member.key, 1);  // rank 1 comes second in {3, 1}
  const SplitCall other = splitCall(otherRequest("split", "split2"), where);
  EXPECT_EQ(other.color, NCCL_SPLIT_NOCOLOR);
  EXPECT_EQ(other.key, 0);
  EXPECT_EQ(kNoColor, NCCL_SPLIT_NOCOLOR);
  SplitRequest bad = memberRequest("new_group", "sub1", "main/sub1", 0, {0, 2}, 2);
  bad.rank = 2;  // outside its two members
  EXPECT_THROW_WITH(splitCall(bad, where), InvalidArgument, "[group main rank 1] split",
                    "subgroup main/sub1 came with color 0 and rank 2 of 2 members");
}

// What ncclCommSplit does with every rank's (color, key), as nccl.h documents it: ranks of
// one color form one communicator, ordered by key, then by rank in the parent.
std::map<int, std::pair<int, int>> ncclAssignment(const std::vector<SplitCall>& calls) {
  std::map<int, std::vector<std::pair<int, int>>> byColor;  // color -> (key, parent rank)
  for (int r = 0; r < static_cast<int>(calls.size()); ++r)
    if (calls[r].color != NCCL_SPLIT_NOCOLOR) byColor[calls[r].color].emplace_back(calls[r].key, r);
  std::map<int, std::pair<int, int>> out;  // parent rank -> (new rank, new size)
  for (auto& [color, ranks] : byColor) {
    std::sort(ranks.begin(), ranks.end());
    for (int i = 0; i < static_cast<int>(ranks.size()); ++i) out[ranks[i].second] = {i, static_cast<int>(ranks.size())};
  }
  return out;
}

TEST(NcclSplitRule, NcclOrdersTheNewCommunicatorAsTheHostOrdersTheSubgroup) {
  // split(color, key) over 5 ranks: rank 0 opts out; color 7 = {4, 1} by key; color 2 =
  // {2, 3} (equal keys: parent rank order). newGroup({1, 3}): one subgroup, color 0.
  const std::vector<std::vector<SplitRequest>> rounds = {
      {otherRequest("split", "split1"), memberRequest("split", "split1", "main/split1c7", 7, {4, 1}, 1),
       memberRequest("split", "split1", "main/split1c2", 2, {2, 3}, 2),
       memberRequest("split", "split1", "main/split1c2", 2, {2, 3}, 3),
       memberRequest("split", "split1", "main/split1c7", 7, {4, 1}, 4)},
      {otherRequest("new_group", "sub2"), memberRequest("new_group", "sub2", "main/sub2", 0, {1, 3}, 1),
       otherRequest("new_group", "sub2"), memberRequest("new_group", "sub2", "main/sub2", 0, {1, 3}, 3),
       otherRequest("new_group", "sub2")},
  };
  for (const auto& requests : rounds) {
    std::vector<SplitCall> calls;
    for (int r = 0; r < static_cast<int>(requests.size()); ++r) calls.push_back(splitCall(requests[r], {"main", r}));
    const auto assigned = ncclAssignment(calls);
    for (int r = 0; r < static_cast<int>(requests.size()); ++r) {
      const SplitRequest& req = requests[r];
      if (req.color == kNoColor) {
        EXPECT_EQ(assigned.count(r), 0u) << req.round << " rank " << r;  // NCCL gives it no communicator
        continue;
      }
      ASSERT_EQ(assigned.count(r), 1u) << req.round << " rank " << r;
      const auto [ncclRank, ncclSize] = assigned.at(r);
      EXPECT_EQ(splitMismatch(req, ncclRank, ncclSize), "") << req.round << " rank " << r;
    }
  }
}

TEST(NcclSplitRule, AMismatchedSplitSaysWhatDiffers) {
  const SplitRequest req = memberRequest("split", "split1", "main/split1c0", 0, {0, 2, 3}, 2);
  EXPECT_EQ(splitMismatch(req, 1, 3), "");
  EXPECT_EQ(splitMismatch(req, 2, 3),
            "ncclCommSplit made rank 2 of 3 where subgroup main/split1c0 has this rank as 1 of 3");
  EXPECT_NE(splitMismatch(req, 1, 4), "");
}

// The agreement, ranks as threads over one HashStore: every rank gets the same answer.
std::vector<std::string> agree(const std::shared_ptr<HashStore>& store, const std::string& round,
                               const std::vector<std::string>& votes) {
  const int world = static_cast<int>(votes.size());
  std::vector<std::string> out(world);
  runRanks(world, [&](int r) { out[r] = agreeOnSplit(parentContext(store, r, world), round, "new_group", votes[r]); });
  return out;
}

TEST(NcclSplitAgreement, EveryRankTakesTheSameDecision) {
  auto store = std::make_shared<HashStore>(std::chrono::seconds(20));
  const std::string k0 = uniqueIdKey(0);
  EXPECT_EQ(agree(store, "sub1", {k0, k0, k0, k0}), std::vector<std::string>(4, k0));
  // One rank without a communicator: nobody splits, not only that rank.
  EXPECT_EQ(agree(store, "sub2", {k0, k0, "", k0}), std::vector<std::string>(4, ""));
  EXPECT_EQ(agree(store, "split3", {k0, uniqueIdKey(1), k0, k0}), std::vector<std::string>(4, ""));
  // Rounds never share keys: a later round decides from its own votes.
  EXPECT_EQ(agree(store, "sub4", {k0, k0, k0, k0}), std::vector<std::string>(4, k0));
  EXPECT_TRUE(store->check({"main/1/backend/nccl/" + splitKey("sub2") + "/2"}));
}

TEST(NcclSplitAgreement, ARankThatNeverTakesPartTimesOutTheOthersNamingIt) {
  auto store = std::make_shared<HashStore>(std::chrono::seconds(20));
  constexpr int kWorld = 3;
  runRanks(kWorld, [&](int r) {
    if (r == 2) return;  // never calls newGroup
    const auto ctx = parentContext(store, r, kWorld, std::chrono::milliseconds(300));
    const std::string where = "[group main rank " + std::to_string(r) + "] new_group";
    EXPECT_THROW_WITH(agreeOnSplit(ctx, "sub1", "new_group", uniqueIdKey(0)), TimeoutError, where.c_str(),
                      "ranks 2 did not publish",
                      "every rank of group main calls new_group, members of the new subgroup or not");
  });
}

// A rank whose nccl backend does not exist (no GPU there) never votes; then nobody holds
// a communicator of the whole group, and ranks without one vote and go on at once
// instead of waiting for it until the timeout.
TEST(NcclSplitAgreement, RanksWithoutACommunicatorDoNotWaitForARankThatNeverVotes) {
  auto store = std::make_shared<HashStore>(std::chrono::seconds(20));
  constexpr int kWorld = 3;
  const auto started = std::chrono::steady_clock::now();
  std::vector<std::string> out(kWorld, "unset");
  runRanks(kWorld, [&](int r) {
    if (r == 2) return;  // no backend: prepareSplit is never called here
    out[r] = agreeOnSplit(parentContext(store, r, kWorld, std::chrono::seconds(20)), "sub1", "new_group", "");
  });
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
  EXPECT_EQ(out, (std::vector<std::string>{"", "", "unset"}));
  EXPECT_TRUE(store->check({"main/1/backend/nccl/" + splitKey("sub1") + "/1"}));
}

TEST(NcclSplitAgreement, ARankThatCannotVoteFailsTheOthersBeforeTheTimeout) {
  auto store = std::make_shared<HashStore>(std::chrono::seconds(20));
  constexpr int kWorld = 3;
  const auto started = std::chrono::steady_clock::now();
  runRanks(kWorld, [&](int r) {
    const auto ctx = parentContext(store, r, kWorld, std::chrono::seconds(20));
    if (r == 1) {  // as prepareSplit does when cudaGetDevice fails
      publishFailure(ctx, splitKey("split1"), "could not vote: cudaGetDevice failed");
      return;
    }
    EXPECT_THROW_WITH(agreeOnSplit(ctx, "split1", "split", uniqueIdKey(0)), PluginError,
                      "rank 1 could not vote: cudaGetDevice failed");
  });
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10));
}

}  // namespace
}  // namespace commhost::test
