// SPDX-License-Identifier: Apache-2.0
// ProcessGroup::shrink (elastic membership): ranks as threads over a HashStore, real gloo
// and shm. The rank that is left out here is alive but does not take part in time (the
// timeout excludes it); processes killed for real are in tests/cli (shrink_kill.sh).
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace commhost::test {
namespace {

using std::chrono::milliseconds;

// Every op the survivors run after a shrink, checked: allreduce, broadcast from the
// highest rank, allgather of each rank's rank.
void checkOps(ProcessGroup& pg) {
  for (int i = 0; i < 3; ++i) checkedAllreduce(pg, i);
  Tensor b = Tensor::empty({8}, DType::Int32);
  for (int i = 0; i < 8; ++i) b.data_as<int32_t>()[i] = pg.rank() == pg.size() - 1 ? 77 : -1;
  BroadcastOptions bo;
  bo.root = pg.size() - 1;
  pg.broadcast(b, bo)->wait();
  for (int i = 0; i < 8; ++i) ASSERT_EQ(b.data_as<int32_t>()[i], 77) << "rank " << pg.rank();
  Tensor in = Tensor::empty({1}, DType::Int32);
  in.data_as<int32_t>()[0] = pg.rank();
  std::vector<Tensor> out;
  for (int r = 0; r < pg.size(); ++r) out.push_back(Tensor::empty({1}, DType::Int32));
  pg.allgather(out, in)->wait();
  for (int r = 0; r < pg.size(); ++r) ASSERT_EQ(out[r].data_as<int32_t>()[0], r) << "rank " << pg.rank();
}

class ShrinkOn : public ::testing::TestWithParam<const char*> {};

TEST_P(ShrinkOn, SurvivorsRenumberAndGoOnWithoutARankThatDidNotComeInTime) {
  constexpr int kWorld = 4;
  auto groups = makeGroups(GetParam(), kWorld);
  // A completion hook goes with the group to its new membership: its events carry the
  // new rank (old rank 3 is rank 2 after the shrink).
  std::mutex hookMutex;
  std::set<int> hookRanks;
  const int hook = groups[3]->addCompletionHook([&](const CompletionEvent& e) {
    std::lock_guard<std::mutex> lock(hookMutex);
    hookRanks.insert(e.rank);
  });
  runRanks(kWorld, [&](int r) {
    ProcessGroup& pg = *groups[r];
    for (int i = 0; i < 3; ++i) checkedAllreduce(pg, i);
    const uint64_t seq = pg.seq();
    if (r == 2) {
      // Alive, but too late: the others decided without it.
      std::this_thread::sleep_for(milliseconds(1500));
      EXPECT_THROW_WITH(pg.shrink(shrinkWithin(milliseconds(500))), AbortedError, "removed from group",
                        "ranks 0, 1, 3) decided without it", "[group main rank 2] shrink");
      Tensor t = Tensor::empty({4}, DType::Float32);
      EXPECT_THROW(pg.allreduce(t)->wait(), Error) << "a removed rank's group stays aborted";
      return;
    }
    const ShrinkReport report = pg.shrink(shrinkWithin(milliseconds(500)));
    EXPECT_EQ(report.worldSize, 3);
    EXPECT_EQ(report.rank, r < 2 ? r : 2);
    EXPECT_EQ(pg.size(), 3);
    EXPECT_EQ(pg.rank(), report.rank);
    EXPECT_EQ(report.oldRanks, (std::vector<int>{0, 1, 3}));
    EXPECT_EQ(report.removed, std::vector<int>{2});
    EXPECT_EQ(pg.globalRanks(), (std::vector<int>{0, 1, 3})) << "members keep their job-wide rank";
    EXPECT_EQ(report.generation, 1u);
    EXPECT_EQ(pg.generation(), 1u);
    EXPECT_EQ(pg.seq(), seq) << "seq numbers continue";
    checkOps(pg);
  });
  // The flight recorder has each rank's record of the change (the ranks share a process).
  const auto dump = nlohmann::json::parse(flightRecorderJson("shrink test"));
  std::multiset<std::string> outcomes;
  for (const auto& m : dump.at("memberships")) {
    outcomes.insert(m.at("outcome").get<std::string>());
    if (m.at("outcome") == "shrunk") {
      EXPECT_EQ(m.at("world_before"), 4);
      EXPECT_EQ(m.at("world_after"), 3);
      EXPECT_EQ(m.at("removed"), nlohmann::json::array({2}));
      EXPECT_EQ(m.at("to_generation"), 1);
    }
  }
  EXPECT_EQ(outcomes, (std::multiset<std::string>{"removed", "shrunk", "shrunk", "shrunk"}));
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(hookMutex);
      if (hookRanks.count(2) || std::chrono::steady_clock::now() > until) {
        EXPECT_EQ(hookRanks, (std::set<int>{3, 2})) << "events before (rank 3) and after the shrink (rank 2)";
        break;
      }
    }
    std::this_thread::sleep_for(milliseconds(10));
  }
  groups[3]->removeCompletionHook(hook);
}

// A subgroup is a group of its own: a member late to its shrink is removed from the
// subgroup alone, the survivors renumber there (keeping their job-wide ranks), and the
// parent group, where every rank is still a member, goes on with all of them.
TEST_P(ShrinkOn, ASubgroupShrinksOnItsOwnAndTheParentGoesOn) {
  constexpr int kWorld = 4;
  auto groups = makeGroups(GetParam(), kWorld);
  std::vector<std::shared_ptr<ProcessGroup>> subs(kWorld);
  runRanks(kWorld, [&](int r) { subs[r] = groups[r]->newGroup({1, 2, 3}); });
  runRanks(kWorld, [&](int r) {
    if (subs[r]) {
      ProcessGroup& sub = *subs[r];
      checkedAllreduce(sub, 0);
      if (r == 3) {
        std::this_thread::sleep_for(milliseconds(1500));  // alive, but too late for the subgroup's round
        EXPECT_THROW_WITH(sub.shrink(shrinkWithin(milliseconds(500))), AbortedError, "removed from group");
      } else {
        const ShrinkReport report = sub.shrink(shrinkWithin(milliseconds(500)));
        EXPECT_EQ(report.worldSize, 2);
        EXPECT_EQ(report.removed, std::vector<int>{2});
        EXPECT_EQ(sub.rank(), r - 1);
        EXPECT_EQ(sub.globalRanks(), (std::vector<int>{1, 2}));
        checkedAllreduce(sub, 1);
      }
    }
    checkedAllreduce(*groups[r], 2);  // the parent still has all four
    EXPECT_EQ(groups[r]->size(), kWorld);
  });
}

// A rank that destroys its group (a clean exit) is gone at once for the survivors: their
// op fails, and the agreement does not wait for it until the timeout.
TEST(Shrink, ARankThatLeftFailsTheSurvivorsOpAndIsNotWaitedFor) {
  constexpr int kWorld = 3;
  auto registry = testRegistry();
  auto config = configFrom(kGloo, *registry,
                           {"supervisor.on_peer_loss=shrink", "supervisor.heartbeat.interval=50ms",
                            "supervisor.heartbeat.timeout=2s", "supervisor.on_error=teardown"});
  auto store = std::make_shared<HashStore>(std::chrono::seconds(20));
  std::vector<std::shared_ptr<ProcessGroup>> groups(kWorld);
  runRanks(kWorld, [&](int r) { groups[r] = ProcessGroup::create({config, registry, store, r, kWorld}); });
  runRanks(kWorld, [&](int r) {
    checkedAllreduce(*groups[r], 0);
    if (r == 1) {
      groups[r].reset();  // leaves: its peers see its left key
      return;
    }
    ProcessGroup& pg = *groups[r];
    Tensor t = Tensor::empty({1 << 16}, DType::Float32);
    // on_error teardown would end this process: with on_peer_loss shrink the op fails.
    EXPECT_THROW(pg.allreduce(t)->wait(), Error);
    const ShrinkReport report = pg.shrink(shrinkWithin(milliseconds(20000)));
    EXPECT_LT(report.agree, std::chrono::seconds(10)) << "the agreement waited for a rank that had left";
    EXPECT_EQ(report.removed, std::vector<int>{1});
    EXPECT_EQ(pg.size(), 2);
    checkOps(pg);
  });
}

TEST(Shrink, BelowMinRanksEveryMemberRefusesAndTheGroupStaysAborted) {
  constexpr int kWorld = 3;
  auto registry = testRegistry();
  auto config = configFrom(kGloo, *registry, {"supervisor.min_ranks=3"});
  auto store = std::make_shared<HashStore>(std::chrono::seconds(20));
  std::vector<std::shared_ptr<ProcessGroup>> groups(kWorld);
  runRanks(kWorld, [&](int r) { groups[r] = ProcessGroup::create({config, registry, store, r, kWorld}); });
  runRanks(kWorld, [&](int r) {
    if (r == 2) return;  // never comes
    ProcessGroup& pg = *groups[r];
    EXPECT_THROW_WITH(pg.shrink(shrinkWithin(milliseconds(300))), PeerLostError, "only 2 of 3 ranks are left (lost: 2)",
                      "below supervisor.min_ranks 3", "lower supervisor.min_ranks");
    EXPECT_EQ(pg.size(), 3) << "nothing changed";
    EXPECT_EQ(pg.generation(), 0u);
  });
}

// Every rank took part: the group is rebuilt on the same ranks (a group aborted for a
// passing reason comes back).
TEST(Shrink, WithEveryRankPresentRebuildsAnAbortedGroupOnTheSameRanks) {
  constexpr int kWorld = 2;
  auto groups = makeGroups(kShm, kWorld);
  runRanks(kWorld, [&](int r) {
    ProcessGroup& pg = *groups[r];
    checkedAllreduce(pg, 0);
    pg.abort("a test aborts it");
    Tensor t = Tensor::empty({4}, DType::Float32);
    EXPECT_THROW(pg.allreduce(t)->wait(), Error);
    for (uint64_t g = 1; g <= 3; ++g) {
      const ShrinkReport report = pg.shrink();
      EXPECT_EQ(report.worldSize, kWorld);
      EXPECT_EQ(report.rank, r);
      EXPECT_TRUE(report.removed.empty());
      EXPECT_EQ(pg.generation(), g);
      checkOps(pg);
    }
  });
}

// A member lost during a hot swap leaves the others apart: one failed inside the swap,
// another in the op before it, so their swap counts differ. After the shrink their next
// swap still meets (a membership round starts the counts over); it used to wait on keys
// of different attempts until the timeout, on every member.
TEST(Shrink, MembersThatFailedInAndBeforeASwapSwapAgainAfterTheShrink) {
  constexpr int kWorld = 3;
  auto groups = makeGroups(kShm, kWorld);
  auto registry = testRegistry();
  auto gloo = configFrom(kGloo, *registry), shm = configFrom(kShm, *registry);
  runRanks(kWorld, [&](int r) {
    ProcessGroup& pg = *groups[r];
    checkedAllreduce(pg, 0);
    if (r != 2) {  // rank 2 never comes: the swap of ranks 0 and 1 fails
      ReconfigureOptions quick;
      quick.timeout = milliseconds(300);
      EXPECT_THROW(pg.reconfigure(gloo, quick), Error);
    }
    pg.abort("a test aborts it: the step failed");
    const ShrinkReport report = pg.shrink();
    EXPECT_EQ(report.worldSize, kWorld);
    ReconfigureOptions patient;
    patient.timeout = std::chrono::seconds(10);
    const auto swapped = pg.reconfigure(gloo, patient);
    EXPECT_EQ(swapped.generation, pg.generation());
    checkOps(pg);
    pg.reconfigure(shm, patient);
    checkOps(pg);
  });
}

// A rank that left is replaced: a new process (here a thread) for global rank 1 starts
// with group.join, asks the members, and they admit it at their next syncPoint(): the group
// grows back to 3 ranks, numbered by global rank, and every op is right on all three.
TEST_P(ShrinkOn, ARestartedRankJoinsAtTheMembersNextSyncPoint) {
  constexpr int kWorld = 3;
  auto registry = testRegistry();
  const std::vector<std::string> sets = {"group.sync_poll=20ms", "supervisor.heartbeat.interval=50ms"};
  auto config = configFrom(GetParam(), *registry, sets);
  auto joinSets = sets;
  joinSets.push_back("group.join=true");
  auto joinConfig = configFrom(GetParam(), *registry, joinSets);
  EXPECT_EQ(config->hash, joinConfig->hash) << "group.join is left out of the config hash";
  auto store = std::make_shared<HashStore>(std::chrono::seconds(20));
  std::vector<std::shared_ptr<ProcessGroup>> groups(kWorld);
  runRanks(kWorld, [&](int r) { groups[r] = ProcessGroup::create({config, registry, store, r, kWorld}); });
  std::atomic<bool> shrunk{false};
  runRanks(kWorld + 1, [&](int r) {
    if (r == 1) {
      groups[1].reset();  // leaves
      return;
    }
    if (r == kWorld) {  // the replacement, once the survivors are on their own
      while (!shrunk.load()) std::this_thread::sleep_for(milliseconds(10));
      auto pg = ProcessGroup::create({joinConfig, registry, store, 1, kWorld});
      EXPECT_EQ(pg->size(), 3);
      EXPECT_EQ(pg->rank(), 1) << "members are numbered by global rank";
      EXPECT_EQ(pg->generation(), 2u);
      const int64_t k = 0;
      int64_t next = k;
      {
        Tensor t = Tensor::empty({1}, DType::Int64);
        t.data_as<int64_t>()[0] = -1;
        AllreduceOptions o;
        o.reduceOp = ReduceOp::Max;
        pg->allreduce(t, o)->wait();
        next = t.data_as<int64_t>()[0];
      }
      for (int64_t i = next; i < next + 5; ++i) {
        pg->syncPoint();
        checkedAllreduce(*pg, static_cast<int>(i));
      }
      checkOps(*pg);
      groups[1] = pg;  // destroyed with the others
      return;
    }
    ProcessGroup& pg = *groups[r];
    pg.shrink(shrinkWithin(milliseconds(5000)));
    EXPECT_EQ(pg.size(), 2);
    if (r == 0) shrunk.store(true);
    int64_t i = 0;
    // Steps until the group has grown back, then 5 more with the joiner.
    for (; pg.size() == 2; ++i) {
      pg.syncPoint();
      if (pg.size() == 3) break;
      checkedAllreduce(pg, static_cast<int>(i));
      ASSERT_LT(i, 100000) << "the joiner was never admitted";
    }
    EXPECT_EQ(pg.rank(), r == 0 ? 0 : 2);
    Tensor t = Tensor::empty({1}, DType::Int64);
    t.data_as<int64_t>()[0] = i;
    AllreduceOptions o;
    o.reduceOp = ReduceOp::Max;
    pg.allreduce(t, o)->wait();
    const int64_t next = t.data_as<int64_t>()[0];
    for (int64_t j = next; j < next + 5; ++j) {
      if (j > next) pg.syncPoint();
      checkedAllreduce(pg, static_cast<int>(j));
    }
    checkOps(pg);
  });
}

TEST(Shrink, RefusedInsideAReducerIterationAndTheRoundsStayAligned) {
  auto groups = makeGroups(kSelfConfig, 1);
  ProcessGroup& pg = *groups[0];
  pg.beginForeignIssue();
  EXPECT_THROW_WITH(pg.shrink(), InvalidArgument, "inside a span of beginForeignIssue()", "destroy the Reducer");
  pg.endForeignIssue();
  const ShrinkReport report = pg.shrink();  // round 0: the refusal counted no round
  EXPECT_EQ(report.generation, 1u);
  EXPECT_EQ(report.worldSize, 1);
  checkOps(pg);
}

// Rank 2 leaves and a new one takes its place, again and again: the members' threads and
// descriptors do not grow with the cycles (each generation's backends, heartbeat
// watches and sync poller are let go), nor do the store's keys: each round's are swept a
// round later, the leaving rank's through its manifest, all but the round's decision
// (kept for a removed rank that resumes late). Store paths do not nest with the rounds.
TEST_P(ShrinkOn, LeaveAndRejoinCyclesLeakNoThreadsOrDescriptors) {
  constexpr int kWorld = 3, kCycles = 22;
  auto registry = testRegistry();
  const std::vector<std::string> sets = {"group.sync_poll=10ms", "supervisor.heartbeat.interval=50ms"};
  auto config = configFrom(GetParam(), *registry, sets);
  auto joinSets = sets;
  joinSets.push_back("group.join=true");
  auto joinConfig = configFrom(GetParam(), *registry, joinSets);
  auto store = std::make_shared<HashStore>(std::chrono::seconds(20));
  std::vector<std::shared_ptr<ProcessGroup>> groups(kWorld);
  runRanks(kWorld, [&](int r) { groups[r] = ProcessGroup::create({config, registry, store, r, kWorld}); });
  size_t threads = 0, fds = 0;
  int64_t keys = 0;
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    if (cycle == 2) {
      threads = countEntries("/proc/self/task");
      fds = countEntries("/proc/self/fd");
      keys = store->numKeys();
    }
    groups[2].reset();  // leaves
    runRanks(kWorld, [&](int r) {
      if (r == 2) {
        groups[2] = ProcessGroup::create({joinConfig, registry, store, 2, kWorld});
        checkedAllreduce(*groups[2], cycle);
        return;
      }
      ProcessGroup& pg = *groups[r];
      pg.shrink(shrinkWithin(milliseconds(5000)));
      // A collective every step, as syncPoint() requires (no rank runs ahead of rank 0).
      for (int i = 0;; ++i) {
        pg.syncPoint();
        if (pg.size() == 3) break;
        checkedAllreduce(pg, i);
        ASSERT_LT(i, 100000) << "the joiner was never admitted";
      }
      checkedAllreduce(pg, cycle);
    });
  }
  // A thread or two of a retiring generation may still be on its way out.
  for (int i = 0; i < 100 && countEntries("/proc/self/task") > threads; ++i)
    std::this_thread::sleep_for(milliseconds(20));
  EXPECT_LE(countEntries("/proc/self/task"), threads) << "threads grew over " << kCycles - 2 << " cycles";
  EXPECT_LE(countEntries("/proc/self/fd"), fds + 2) << "descriptors grew over " << kCycles - 2 << " cycles";
  EXPECT_EQ(groups[0]->generation(), static_cast<uint64_t>(2 * kCycles));
  // Two rounds a cycle, a decision each, and the few keys in flight at either count;
  // before the sweep ~60 keys a cycle stayed.
  EXPECT_LE(store->numKeys(), keys + 2 * (kCycles - 2) + 12) << "store keys grew over " << kCycles - 2 << " cycles";
  const std::string last = "main/1/m" + std::to_string(2 * kCycles - 1) + "/built/0";
  EXPECT_TRUE(store->check({last})) << "the last round's store is not at " << last;
}

// A rank stopped through a shrink and the next round (whose commit swept the first
// round's keys) still learns it was removed, at once and naming the survivors: the
// round's decision stays. Without it, it would wait for the others' alive keys or
// decide a membership of its own.
TEST(Shrink, ARankResumingTwoRoundsLateIsToldItWasRemoved) {
  constexpr int kWorld = 3;
  auto groups = makeGroups(kGloo, kWorld);
  std::atomic<int> survivorsDone{0};
  runRanks(kWorld, [&](int r) {
    ProcessGroup& pg = *groups[r];
    checkedAllreduce(pg, 0);
    if (r == 2) {
      while (survivorsDone.load() < 2) std::this_thread::sleep_for(milliseconds(10));
      const auto start = std::chrono::steady_clock::now();
      EXPECT_THROW_WITH(pg.shrink(shrinkWithin(milliseconds(5000))), AbortedError, "removed from group",
                        "ranks 0, 1) decided without it");
      EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4)) << "it waited for swept keys";
      return;
    }
    EXPECT_EQ(pg.shrink(shrinkWithin(milliseconds(500))).worldSize, 2);
    pg.abort("a second round, all present");
    EXPECT_EQ(pg.shrink().worldSize, 2);
    pg.abort("a third: its commit sweeps the first round's generation");
    EXPECT_EQ(pg.shrink().worldSize, 2);
    checkOps(pg);
    ++survivorsDone;
  });
}

INSTANTIATE_TEST_SUITE_P(Backends, ShrinkOn, ::testing::Values(kGloo, kShm),
                         [](const auto& info) { return std::string(info.index == 0 ? "gloo" : "shm"); });

}  // namespace
}  // namespace commhost::test
