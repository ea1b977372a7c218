// SPDX-License-Identifier: Apache-2.0
// The hier backend with ranks as threads over a HashStore: its topology from host
// identities and blocks, every op it builds at even, uneven, one-host and one-rank-per-host
// layouts (group_size makes blocks of threads act as hosts; intra shm, inter gloo) checked
// element by element for every dtype and reduce op, and the errors of a composite backend:
// parts that are missing, name the backend itself, lack a step, or time out.
#include "../host/test_util.h"
#include "reference_data.h"
#include "topology.h"

namespace commhost::test {
namespace {

using hier::Topology;

TEST(HierTopology, RanksWithTheSameIdentityShareAHostInRankOrder) {
  const Topology t = Topology::fromIdentities({"a", "b", "a", "b", "c"});
  EXPECT_EQ(t.hosts, (std::vector<std::vector<int>>{{0, 2}, {1, 3}, {4}}));
  EXPECT_EQ(t.hostOf, (std::vector<int>{0, 1, 0, 1, 2}));
  EXPECT_EQ(t.localIndex, (std::vector<int>{0, 0, 1, 1, 0}));
  EXPECT_EQ(t.leaders(), (std::vector<int>{0, 1, 4}));
  EXPECT_EQ(t.maxLocal, 2);
  EXPECT_EQ(t.describe(), "3 hosts: [0 2] [1 3] [4]");
}

TEST(HierTopology, RoundRobinPutsRankRInGroupRModTheGroupCount) {
  const Topology t = Topology::fromRoundRobin(5, 2);  // 3 groups
  EXPECT_EQ(t.hosts, (std::vector<std::vector<int>>{{0, 3}, {1, 4}, {2}}));
  EXPECT_EQ(t.leaders(), (std::vector<int>{0, 1, 2}));
}

TEST(HierTopology, BlocksOfConsecutiveRanksTheLastShorter) {
  const Topology t = Topology::fromBlocks(5, 2);
  EXPECT_EQ(t.hosts, (std::vector<std::vector<int>>{{0, 1}, {2, 3}, {4}}));
  EXPECT_EQ(t.localIndex, (std::vector<int>{0, 1, 0, 1, 0}));
  EXPECT_EQ(Topology::fromBlocks(3, 8).describe(), "1 host: [0 1 2]");
}

std::string hierConfig(int groupSize, const std::string& intra = "shm", const std::string& timeout = "20s",
                       const std::string& chunk = "4096", bool roundRobin = false) {
  return "group: { timeout: " + timeout +
         " }\n"
         "backends:\n"
         "  gloo: { options: { threads: 1, contexts: 1 } }\n"
         "  shm: { options: { chunk: " +
         chunk +
         ", inline_max: 0 } }\n"
         "  one: { plugin: allreduceonly }\n"
         "  hier: { plugin: hier, options: { intra: " +
         intra + ", inter: gloo, group_size: " + std::to_string(groupSize) +
         ", round_robin: " + (roundRobin ? "true" : "false") +
         " } }\n"
         "routes: [{ device: cpu, backend: [hier, gloo] }]\n";
}

struct Layout {
  int world;
  int groupSize;
  const char* name;
  bool roundRobin = false;
};

class HierWorld : public ::testing::TestWithParam<Layout> {
 protected:
  void SetUp() override {
    groups = makeGroups(hierConfig(GetParam().groupSize, "shm", "20s", "4096", GetParam().roundRobin),
                        GetParam().world);
  }
  void each(const std::function<void(ProcessGroup&, int)>& fn) {
    runRanks(GetParam().world, [&](int r) { fn(*groups[r], r); });
  }
  std::vector<std::shared_ptr<ProcessGroup>> groups;
};

TEST_P(HierWorld, EveryOpIsRoutedToHier) {
  for (OpType op : {OpType::Allreduce, OpType::Broadcast, OpType::AllgatherIntoTensor, OpType::ReduceScatterTensor,
                    OpType::Barrier})
    EXPECT_EQ(groups[0]->routes().backendNames()[static_cast<size_t>(
                  groups[0]->routes().find(op, DeviceType::CPU, 64, DType::Float32, ReduceOp::Sum)->backend)],
              "hier")
        << opName(op);
}

TEST_P(HierWorld, ReductionsEveryDTypeAndOp) {
  const int world = GetParam().world;
  each([&](ProcessGroup& pg, int rank) {
    for (int64_t n : {1, 1531}) {  // 1531 x 8 B: several 4 KiB shm chunks and a remainder
      for (int d = 0; d < kNumDTypes; ++d) {
        const auto dtype = static_cast<DType>(d);
        for (int k = 0; k < ReduceOp::kNumKinds; ++k) {
          const auto kind = static_cast<ReduceOp::Kind>(k);
          if (!valid(dtype, kind)) continue;
          const ReduceOp op = kind == ReduceOp::PreMulSum ? ReduceOp::preMulSum(0.5) : ReduceOp(kind);
          const std::string what = std::string(dtypeName(dtype)) + " " + reduceOpName(kind) + " n " +
                                   std::to_string(n) + " rank " + std::to_string(rank);
          Tensor all = sourceTensor(dtype, rank, n);
          pg.allreduce(all, {op})->wait();
          Tensor rs = Tensor::empty({n}, dtype);
          pg.reduceScatterTensor(rs, sourceTensor(dtype, rank, n * world), {op})->wait();
          for (int64_t i = 0; i < n; ++i) {
            expectNear(all, i, expected(dtype, kind, world, i), "allreduce " + what);
            expectNear(rs, i, expected(dtype, kind, world, rank * n + i), "reduce_scatter " + what);
          }
        }
      }
    }
  });
}

// Avg of f16 values whose sum overflows f16 (max 65504) but whose mean fits: each input is
// scaled before the parts sum it.
TEST_P(HierWorld, HalfAvgOfLargeValuesDoesNotOverflow) {
  const int world = GetParam().world;
  each([&](ProcessGroup& pg, int rank) {
    constexpr int64_t n = 257;
    auto filled = [](int64_t count) { return constantTensor(DType::Float16, count, 40000.0); };
    Tensor all = filled(n);
    pg.allreduce(all, {ReduceOp::Avg})->wait();
    Tensor rs = Tensor::empty({n}, DType::Float16);
    pg.reduceScatterTensor(rs, filled(n * world), {ReduceOp::Avg})->wait();
    for (int64_t i = 0; i < n; i += 37) {
      expectNear(all, i, 40000.0, "allreduce rank " + std::to_string(rank));
      expectNear(rs, i, 40000.0, "reduce_scatter rank " + std::to_string(rank));
    }
  });
}

TEST_P(HierWorld, DataMovementOps) {
  const int world = GetParam().world;
  each([&](ProcessGroup& pg, int rank) {
    for (int64_t n : {1, 3001}) {
      const std::string at = " n " + std::to_string(n) + " rank " + std::to_string(rank);
      for (int root = 0; root < world; ++root) {  // roots that lead their host and roots that do not
        Tensor b = patternTensor(rank, n);
        pg.broadcast(b, {root})->wait();
        expectPattern(b, root, 0, n, "broadcast from " + std::to_string(root) + at);
      }
      std::vector<Tensor> outs;
      for (int r = 0; r < world; ++r) outs.push_back(Tensor::empty({n}, DType::Float32));
      pg.allgather(outs, patternTensor(rank, n))->wait();
      for (int r = 0; r < world; ++r) expectPattern(outs[r], r, 0, n, "allgather" + at);

      Tensor flat = Tensor::empty({n * world}, DType::Float32);
      pg.allgatherIntoTensor(flat, patternTensor(rank, n))->wait();
      for (int r = 0; r < world; ++r) expectPattern(flat, r, r * n, n, "allgather_into_tensor" + at);

      std::vector<Tensor> rsIn;
      for (int r = 0; r < world; ++r) rsIn.push_back(patternTensor(rank + r, n));
      Tensor rs = Tensor::empty({n}, DType::Float32);
      pg.reduceScatter(rs, rsIn)->wait();
      for (int64_t i = 0; i < n; ++i) {
        float want = 0;
        for (int s = 0; s < world; ++s) want += patternValue(s + rank, i);
        ASSERT_EQ(rs.data_as<float>()[i], want) << "reduce_scatter" << at;
      }

      std::vector<Tensor> several = {patternTensor(rank, n), patternTensor(rank + 1, n + 5)};
      pg.allreduceCoalesced(several)->wait();
      for (int64_t i = 0; i < n + 5; ++i) {
        float want0 = 0, want1 = 0;
        for (int s = 0; s < world; ++s) {
          want0 += patternValue(s, i);
          want1 += patternValue(s + 1, i);
        }
        if (i < n) {
          ASSERT_EQ(several[0].data_as<float>()[i], want0) << "allreduce_coalesced [0]" << at;
        }
        ASSERT_EQ(several[1].data_as<float>()[i], want1) << "allreduce_coalesced [1]" << at;
      }
      pg.barrier()->wait();
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Layouts, HierWorld,
                         ::testing::Values(Layout{4, 2, "two_hosts_of_2"}, Layout{5, 2, "uneven_2_2_1"},
                                           Layout{5, 2, "round_robin_0_3_1_4_2", true}, Layout{3, 3, "one_host"},
                                           Layout{3, 1, "one_rank_per_host"}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(Hier, APartThatIsNotConfiguredIsNamedWithTheConfiguredOnes) {
  EXPECT_THROW_WITH(makeGroups(hierConfig(2, "shmm"), 2), ConfigError, "backend 'hier'",
                    "asked for backend 'shmm', which is not configured", "configured: gloo, hier, one, shm");
}

TEST(Hier, APartThatIsHierItselfIsRefused) {
  EXPECT_THROW_WITH(makeGroups(hierConfig(2, "hier"), 2), ConfigError, "names itself");
}

// allreduceonly serves f32 sum allreduce alone: hier can build none of its ops, and every
// rank (with or without the inter part) refuses alike, naming the missing steps.
TEST(Hier, OpsWhosePartsLackAStepAreRefusedOnEveryRank) {
  auto groups = makeGroups(hierConfig(2, "one"), 4);
  runRanks(4, [&](int r) {
    Tensor t = Tensor::empty({4}, DType::Float32);
    EXPECT_THROW_WITH(groups[r]->allreduce(t), NotSupportedError, "cannot build allreduce",
                      "intra 'one' lacks broadcast");
    EXPECT_THROW_WITH(groups[r]->barrier(), NotSupportedError, "intra 'one' lacks barrier");
  });
  const Capabilities& caps = groups[0]->backend("hier").capabilities();
  EXPECT_TRUE(caps.dtypes.has(DType::Float32));
  EXPECT_FALSE(caps.dtypes.has(DType::Float64)) << "the parts' dtypes intersect";
  EXPECT_TRUE(caps.reduceOps.has(ReduceOp::Avg)) << "avg travels as a sum";
  EXPECT_FALSE(caps.reduceOps.has(ReduceOp::Max));
}

// Rank 1 passes one element more than the others: shm refuses it on host 0 (ranks 0 and
// 1), whose leader then never reaches the leaders' step, so host 1's ranks fail too. No
// rank reports success with a wrong result.
TEST(Hier, RanksThatDisagreeOnTheSizeAllFailNoneSucceeds) {
  auto groups = makeGroups(hierConfig(2, "shm", "2s") + "supervisor: { enabled: false }\n", 4);
  std::vector<std::string> errors(4);
  runRanks(4, [&](int r) {
    Tensor t = Tensor::empty({r == 1 ? 65 : 64}, DType::Float32);
    try {
      groups[r]->allreduce(t)->wait();
    } catch (const Error& e) {
      errors[static_cast<size_t>(r)] = e.what();
    }
  });
  for (int r = 0; r < 4; ++r) EXPECT_NE(errors[static_cast<size_t>(r)], "") << "rank " << r << " reported success";
  EXPECT_NE(errors[1].find("step reduce on intra backend 'shm'"), std::string::npos) << errors[1];
  for (auto& g : groups) g->abort("test over");
}

// The leaders' inter part fails to start (self serves groups of one rank, and the leaders
// are two): the other ranks, which create no inter part, learn it from the store and fail
// at once, naming the rank, instead of waiting for it until the group's timeout (60 s).
TEST(Hier, APartFailingOnSomeRanksFailsEveryRankAtOnce) {
  const std::string yaml =
      "group: { timeout: 60s }\n"
      "backends:\n"
      "  gloo: { options: { threads: 1, contexts: 1 } }\n"
      "  shm: { options: { chunk: 4096 } }\n"
      "  self: {}\n"
      "  hier: { plugin: hier, options: { intra: shm, inter: self, group_size: 2 } }\n"
      "routes: [{ device: cpu, backend: [hier, gloo] }]\n";
  auto registry = testRegistry();
  auto config = configFrom(yaml, *registry);
  auto store = std::make_shared<HashStore>(std::chrono::seconds(60));
  const auto start = std::chrono::steady_clock::now();
  runRanks(4, [&](int r) {
    if (r % 2 == 0)  // a leader: its own part's error
      EXPECT_THROW_WITH(ProcessGroup::create({config, registry, store, r, 4}), ConfigError,
                        "serves groups of one rank");
    else
      EXPECT_THROW_WITH(ProcessGroup::create({config, registry, store, r, 4}), PluginError, "could not create its part",
                        "serves groups of one rank");
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

// Rank 3 skips the allreduce. Without the supervisor (which would report the op first),
// each waiting rank's error is hier's own: this group's op and seq, the step and the part
// that timed out. Every later op is refused: the parts' step counts now disagree.
TEST(Hier, AStepThatTimesOutNamesTheGroupOpAndPartAndBreaksTheBackend) {
  auto groups = makeGroups(hierConfig(2, "shm", "2s") + "supervisor: { enabled: false }\n", 4);
  runRanks(4, [&](int r) {
    if (r == 3) return;
    Tensor t = Tensor::empty({4}, DType::Float32);
    const std::string prefix = "[group main rank " + std::to_string(r) + "] allreduce seq 1";
    EXPECT_THROW_WITH(groups[r]->allreduce(t)->wait(), TimeoutError, prefix.c_str(), ": step ", " backend '",
                      "(group main/in");
    EXPECT_THROW_WITH(groups[r]->allreduce(t)->wait(), BackendError, "allreduce seq 2", "is unusable",
                      "an earlier step failed", "create a new one");
  });
  for (auto& g : groups) g->abort("test over");
}

// hier's own entry is unchanged but its intra part's is not: the swap rebuilds hier (a
// composite is never kept) and the new parts serve the next allreduce.
TEST(Hier, AHotSwapRebuildsHierWhoseEntryIsUnchanged) {
  auto registry = testRegistry();
  auto store = std::make_shared<HashStore>(std::chrono::seconds(20));
  auto before = configFrom(hierConfig(2), *registry);
  auto after = configFrom(hierConfig(2, "shm", "20s", "8192"), *registry);
  std::vector<std::shared_ptr<ProcessGroup>> groups(4);
  runRanks(4, [&](int r) { groups[r] = ProcessGroup::create({before, registry, store, r, 4}); });
  runRanks(4, [&](int r) {
    checkedAllreduce(*groups[r], 0);
    const auto report = groups[r]->reconfigure(after);
    EXPECT_EQ(report.kept, std::vector<std::string>{"gloo"});
    EXPECT_EQ(report.built, std::vector<std::string>{"hier"});
    checkedAllreduce(*groups[r], 1);
  });
}

}  // namespace
}  // namespace commhost::test
