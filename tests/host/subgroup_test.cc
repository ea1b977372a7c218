// SPDX-License-Identifier: Apache-2.0
// Multi-rank groups as threads over a HashStore, on the storecoll reference backend:
// every op's results across ranks, then newGroup and split, and the backends' part in a
// subgroup's creation (Backend::prepareSplit, on the split_recorder test plugin).
#include "test_util.h"

namespace commhost::test {
namespace {

constexpr int kWorld = 3;

// Rank r's value at index i: distinct per rank and index, so a misplaced byte shows.
float value(int rank, int64_t i) { return static_cast<float>(rank * 100 + i); }

Tensor rankTensor(int rank, int64_t n) {
  Tensor t = Tensor::empty({n}, DType::Float32);
  for (int64_t i = 0; i < n; ++i) t.data_as<float>()[i] = value(rank, i);
  return t;
}

class ThreeRanks : public ::testing::Test {
 protected:
  void SetUp() override { groups = makeGroups(kStoreCollConfig, kWorld); }
  void each(const std::function<void(ProcessGroup&, int)>& fn) {
    runRanks(kWorld, [&](int r) { fn(*groups[r], r); });
  }
  std::vector<std::shared_ptr<ProcessGroup>> groups;
};

TEST_F(ThreeRanks, AllreduceEveryReduceOp) {
  each([](ProcessGroup& pg, int r) {
    Tensor t = rankTensor(r, 5);
    pg.allreduce(t)->wait();
    EXPECT_FLOAT_EQ(t.data_as<float>()[4], value(0, 4) + value(1, 4) + value(2, 4));
    Tensor m = rankTensor(r, 5);
    pg.allreduce(m, {ReduceOp::Max})->wait();
    EXPECT_FLOAT_EQ(m.data_as<float>()[1], value(2, 1));
    Tensor a = rankTensor(r, 5);
    pg.allreduce(a, {ReduceOp::Avg})->wait();
    EXPECT_FLOAT_EQ(a.data_as<float>()[2], (value(0, 2) + value(1, 2) + value(2, 2)) / 3);
    Tensor bits = Tensor::empty({2}, DType::Int64);
    bits.data_as<int64_t>()[0] = 1ll << r;
    pg.allreduce(bits, {ReduceOp::BOr})->wait();
    EXPECT_EQ(bits.data_as<int64_t>()[0], 7);
  });
}

TEST_F(ThreeRanks, RootedOps) {
  each([](ProcessGroup& pg, int r) {
    Tensor b = rankTensor(r, 4);
    pg.broadcast(b, {2})->wait();
    EXPECT_FLOAT_EQ(b.data_as<float>()[3], value(2, 3));
    Tensor red = rankTensor(r, 4);
    pg.reduce(red, {1, ReduceOp::Min})->wait();
    if (r == 1) {
      EXPECT_FLOAT_EQ(red.data_as<float>()[3], value(0, 3));
    }
    std::vector<Tensor> gathered;
    if (r == 0)
      for (int i = 0; i < kWorld; ++i) gathered.push_back(Tensor::empty({4}, DType::Float32));
    pg.gather(gathered, rankTensor(r, 4), {0})->wait();
    if (r == 0) {
      for (int i = 0; i < kWorld; ++i) EXPECT_FLOAT_EQ(gathered[i].data_as<float>()[1], value(i, 1));
    }
    std::vector<Tensor> parts;
    if (r == 1)
      for (int i = 0; i < kWorld; ++i) parts.push_back(rankTensor(10 + i, 4));
    Tensor mine = Tensor::empty({4}, DType::Float32);
    pg.scatter(mine, parts, {1})->wait();
    EXPECT_FLOAT_EQ(mine.data_as<float>()[2], value(10 + r, 2));
  });
}

TEST_F(ThreeRanks, GatherAndScatterFamilies) {
  each([](ProcessGroup& pg, int r) {
    Tensor all = Tensor::empty({kWorld * 2}, DType::Float32);
    pg.allgatherIntoTensor(all, rankTensor(r, 2))->wait();
    EXPECT_FLOAT_EQ(all.data_as<float>()[5], value(2, 1));
    Tensor out = Tensor::empty({2}, DType::Float32);
    pg.reduceScatterTensor(out, rankTensor(r, kWorld * 2))->wait();
    // Rank r gets the sum over ranks of elements [2r, 2r+2).
    EXPECT_FLOAT_EQ(out.data_as<float>()[1], value(0, 2 * r + 1) + value(1, 2 * r + 1) + value(2, 2 * r + 1));
    std::vector<Tensor> ins, outs;
    for (int i = 0; i < kWorld; ++i) {
      ins.push_back(rankTensor(r * 10 + i, 3));
      outs.push_back(Tensor::empty({3}, DType::Float32));
    }
    pg.alltoall(outs, ins)->wait();
    for (int i = 0; i < kWorld; ++i) EXPECT_FLOAT_EQ(outs[i].data_as<float>()[0], value(i * 10 + r, 0));
  });
}

TEST_F(ThreeRanks, AlltoallSingleUnevenSplits) {
  // Rank s sends (d + 1) rows to rank d; each row holds one value s*10+d.
  each([](ProcessGroup& pg, int r) {
    std::vector<int64_t> inSplits, outSplits;
    int64_t inRows = 0, outRows = 0;
    for (int d = 0; d < kWorld; ++d) {
      inSplits.push_back(d + 1);
      outSplits.push_back(r + 1);
      inRows += d + 1;
      outRows += r + 1;
    }
    Tensor in = Tensor::empty({inRows, 2}, DType::Float32), out = Tensor::empty({outRows, 2}, DType::Float32);
    int64_t row = 0;
    for (int d = 0; d < kWorld; ++d)
      for (int k = 0; k <= d; ++k, ++row) in.data_as<float>()[2 * row] = in.data_as<float>()[2 * row + 1] = r * 10 + d;
    AlltoallSingleOptions opts;
    opts.inputSplitSizes = inSplits;
    opts.outputSplitSizes = outSplits;
    pg.alltoallSingle(out, in, opts)->wait();
    for (int s = 0; s < kWorld; ++s)
      EXPECT_FLOAT_EQ(out.data_as<float>()[2 * s * (r + 1) + 1], s * 10 + r) << "from " << s;
  });
}

TEST_F(ThreeRanks, PointToPointAndAnySource) {
  each([](ProcessGroup& pg, int r) {
    Tensor t = rankTensor(r, 3);
    if (r == 0) {
      pg.send(t, 1)->wait();
    } else if (r == 1) {
      Tensor got = Tensor::empty({3}, DType::Float32);
      pg.recv(got, 0)->wait();
      EXPECT_FLOAT_EQ(got.data_as<float>()[2], value(0, 2));
      Tensor any = Tensor::empty({3}, DType::Float32);
      auto work = pg.recvAnySource(any);
      work->wait();
      EXPECT_EQ(work->sourceRank(), 2);
      EXPECT_FLOAT_EQ(any.data_as<float>()[0], value(2, 0));
    } else {
      pg.send(t, 1)->wait();
    }
    EXPECT_EQ(pg.seq(), 0u);  // p2p does not advance the collective seq
    pg.barrier()->wait();
    EXPECT_EQ(pg.seq(), 1u);
  });
}

TEST_F(ThreeRanks, MonitoredBarrierNamesTheMissingRank) {
  std::string rank0Error;
  runRanks(kWorld, [&](int r) {
    if (r == 2) return;  // never arrives
    try {
      groups[r]->monitoredBarrier({std::chrono::milliseconds(200)});
      ADD_FAILURE() << "rank " << r << " passed a barrier that rank 2 skipped";
    } catch (const TimeoutError& e) {
      if (r == 0) rank0Error = e.what();
    }
  });
  EXPECT_NE(rank0Error.find("rank 2 did not reach the barrier"), std::string::npos) << rank0Error;
  EXPECT_NE(rank0Error.find("monitored_barrier seq 1"), std::string::npos) << rank0Error;
}

// waitAllRanks names every missing rank, with "rank" or "ranks" as their number asks.
TEST(MonitoredBarrier, WaitingForAllNamesEveryMissingRank) {
  for (const int absent : {1, 2}) {
    auto groups = makeGroups(kStoreCollConfig, kWorld);  // fresh: the skipped barrier leaves seqs apart
    std::string rank0Error;
    runRanks(kWorld, [&](int r) {
      if (r != 0 && r <= absent) return;  // ranks 1..absent never arrive
      try {
        MonitoredBarrierOptions opts;
        opts.timeout = std::chrono::milliseconds(200);
        opts.waitAllRanks = true;
        groups[r]->monitoredBarrier(opts);
      } catch (const TimeoutError& e) {
        if (r == 0) rank0Error = e.what();
      }
    });
    const std::string want = absent == 1 ? "rank 1 did not reach the barrier" : "ranks 1, 2 did not reach the barrier";
    EXPECT_NE(rank0Error.find(want), std::string::npos) << rank0Error;
  }
}

TEST(Subgroups, NewGroupAndSplitComputeOverTheirMembers) {
  constexpr int kRanks = 4;
  auto world = makeGroups(kStoreCollConfig, kRanks);
  runRanks(kRanks, [&](int r) {
    auto odd = world[r]->newGroup({3, 1});
    EXPECT_EQ(odd != nullptr, r % 2 == 1);
    if (odd) {
      EXPECT_EQ(odd->size(), 2);
      EXPECT_EQ(odd->rank(), r / 2);
      EXPECT_EQ(odd->globalRanks(), (std::vector<int>{1, 3}));
      EXPECT_EQ(odd->name(), "main/sub1");
      Tensor t = rankTensor(r, 2);
      odd->allreduce(t)->wait();
      EXPECT_FLOAT_EQ(t.data_as<float>()[1], value(1, 1) + value(3, 1));
    }
    // Colors: {0, 2} and {1, 3}; key reverses the order inside each color.
    auto half = world[r]->split(r % 2, -r);
    ASSERT_NE(half, nullptr);
    EXPECT_EQ(half->size(), 2);
    EXPECT_EQ(half->rank(), r < 2 ? 1 : 0);
    EXPECT_EQ(half->globalRanks()[0], r % 2 + 2);
    Tensor t = rankTensor(r, 2);
    half->allreduce(t)->wait();
    EXPECT_FLOAT_EQ(t.data_as<float>()[0], value(r % 2, 0) + value(r % 2 + 2, 0));
    // A negative color opts out; the others still form a group.
    auto some = world[r]->split(r == 0 ? -1 : 0, r);
    EXPECT_EQ(some == nullptr, r == 0);
    if (some) {
      EXPECT_EQ(some->size(), 3);
      Tensor b = rankTensor(r, 1);
      some->broadcast(b, {0})->wait();
      EXPECT_FLOAT_EQ(b.data_as<float>()[0], value(1, 0));
    }
    world[r]->barrier()->wait();  // the world group still works after its subgroups
  });
}

// Backend::prepareSplit on the split_recorder test plugin, which records each call in its
// store: every rank of the parent takes part in each round (members and the others), with
// its subgroup's color, rank and members, and the subgroup's backend of the same name gets
// what its namesake prepared on that rank.
constexpr const char* kRecorderConfig =
    "group: { timeout: 20s }\n"
    "backends: { rec_a: { plugin: split_recorder }, rec_b: { plugin: split_recorder }, ref: { plugin: storecoll } }\n"
    "routes: [{ device: cpu, backend: [rec_a, ref] }, { device: cpu, op: broadcast, backend: [rec_b, ref] }]\n";

std::string read(ProcessGroup& pg, const std::string& key) { return toString(pg.store()->get(key)); }

TEST(SubgroupHook, EveryParentRankPreparesEachRoundAndMembersGetTheirHandle) {
  constexpr int kRanks = 4;
  auto world = makeGroups(kRecorderConfig, kRanks);
  std::vector<std::shared_ptr<ProcessGroup>> odd(kRanks), half(kRanks);
  runRanks(kRanks, [&](int r) {
    odd[r] = world[r]->newGroup({3, 1});
    // Rank 0 opts out; {2} is color 0; {1, 3} is color 1, ordered 3, 1 by key.
    half[r] = world[r]->split(r == 0 ? -1 : r % 2, -r);
  });
  const std::string none = " group= color=-1 rank=-1 members= timeout=20000";
  for (const char* backend : {"rec_a", "rec_b"}) {
    const std::string at = std::string("backend/") + backend + "/prepared/";
    ProcessGroup& pg = *world[0];  // one store: any rank reads every rank's record
    EXPECT_EQ(read(pg, at + "sub1/0"), "op=new_group" + none);
    EXPECT_EQ(read(pg, at + "sub1/1"), "op=new_group group=main/sub1 color=0 rank=0 members=1,3 timeout=20000");
    EXPECT_EQ(read(pg, at + "sub1/2"), "op=new_group" + none);
    EXPECT_EQ(read(pg, at + "sub1/3"), "op=new_group group=main/sub1 color=0 rank=1 members=1,3 timeout=20000");
    EXPECT_EQ(read(pg, at + "split2/0"), "op=split" + none);
    EXPECT_EQ(read(pg, at + "split2/1"), "op=split group=main/split2c1 color=1 rank=1 members=3,1 timeout=20000");
    EXPECT_EQ(read(pg, at + "split2/2"), "op=split group=main/split2c0 color=0 rank=0 members=2 timeout=20000");
    EXPECT_EQ(read(pg, at + "split2/3"), "op=split group=main/split2c1 color=1 rank=0 members=3,1 timeout=20000");
  }
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(odd[r] != nullptr, r % 2 == 1) << r;
    ASSERT_EQ(half[r] != nullptr, r != 0) << r;
    const std::string rank = std::to_string(r);
    if (odd[r]) {
      // Each backend gets its namesake's handle, made before the subgroup's backends.
      const std::string at = "/split_from/" + std::to_string(odd[r]->rank());
      EXPECT_EQ(read(*odd[r], "backend/rec_a" + at), "rec_a of main rank " + rank + " for main/sub1");
      EXPECT_EQ(read(*odd[r], "backend/rec_b" + at), "rec_b of main rank " + rank + " for main/sub1");
    }
    if (half[r]) {
      EXPECT_EQ(read(*half[r], "backend/rec_a/split_from/" + std::to_string(half[r]->rank())),
                "rec_a of main rank " + rank + " for " + half[r]->name());
      // A subgroup's own subgroups prepare through its backends, which got none themselves.
      auto inner = half[r]->newGroup({0});
      ASSERT_EQ(inner != nullptr, half[r]->rank() == 0);
      if (inner) {
        EXPECT_EQ(read(*inner, "backend/rec_b/split_from/0"),
                  "rec_b of " + half[r]->name() + " rank 0 for " + half[r]->name() + "/sub1");
      }
    }
  }
  // A group of its own is not a subgroup: its factories get nothing.
  EXPECT_EQ(read(*world[2], "backend/rec_a/split_from/2"), "none");
}

TEST(SubgroupHook, AFailingPrepareFailsTheRoundOnItsRankNamingTheBackend) {
  constexpr int kRanks = 3;
  auto world = makeGroups(
      "group: { timeout: 20s }\n"
      "backends: { rec: { plugin: split_recorder, options: { fail_rank: 2 } }, ref: { plugin: storecoll } }\n"
      "routes: [{ device: cpu, backend: [rec, ref] }]\n",
      kRanks);
  runRanks(kRanks, [&](int r) {
    if (r == 2) {
      EXPECT_THROW_WITH(world[r]->newGroup({0, 1}), PluginError, "[group main rank 2] new_group",
                        "backend 'rec' failed to prepare subgroup round sub1", "split_recorder fails on rank 2");
      return;
    }
    auto sub = world[r]->newGroup({0, 1});  // the recorder waits for no peer
    ASSERT_NE(sub, nullptr);
    EXPECT_EQ(sub->rank(), r);
  });
}

}  // namespace
}  // namespace commhost::test

namespace commhost::test {
namespace {

TEST(ProcessGroupCreate, RecreatedGroupStartsClean) {
  auto registry = testRegistry();
  auto config = configFrom(kStoreCollConfig, *registry);
  auto store = std::make_shared<HashStore>(std::chrono::seconds(20));
  for (int round = 0; round < 2; ++round) {
    std::string rank0Error;
    runRanks(2, [&](int r) {
      auto pg = ProcessGroup::create({config, registry, store, r, 2});
      if (r == 1 && round == 1) return;  // the second time, rank 1 skips the barrier
      try {
        pg->monitoredBarrier({std::chrono::milliseconds(300)});
      } catch (const TimeoutError& e) {
        rank0Error = e.what();
      }
    });
    // A re-created group must not see the first group's barrier as done.
    if (round == 1) {
      EXPECT_NE(rank0Error.find("rank 1 did not reach the barrier"), std::string::npos) << rank0Error;
    } else {
      EXPECT_EQ(rank0Error, "");
    }
  }
}

}  // namespace
}  // namespace commhost::test
