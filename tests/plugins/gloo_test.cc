// SPDX-License-Identifier: Apache-2.0
// The gloo backend with ranks as threads over a HashStore: every dtype x reduce op for
// allreduce and reduce, and every other op, at world sizes 1 to 5. Each rank computes
// the expected result from the same formula the inputs come from.
#include <algorithm>
#include <cmath>
#include <thread>

#include "../host/test_util.h"
#include "commhost/kernels/reduce.h"
#include "reference_data.h"

namespace commhost::test {
namespace {

const char* kGlooConfig =
    "group: { timeout: 20s }\n"
    "backends: { gloo: { options: { threads: 2, contexts: 2 } } }\n"
    "routes: [{ device: cpu, backend: gloo }]\n";

// Every op both ways: small ones on the caller (inline_max's default) and every op
// queued to the workers (inline_max: 0).
class GlooWorld : public ::testing::TestWithParam<std::tuple<int, bool>> {
 protected:
  void SetUp() override {
    const std::string config = std::get<1>(GetParam())
                                   ? kGlooConfig
                                   : "group: { timeout: 20s }\n"
                                     "backends: { gloo: { options: { threads: 2, contexts: 2, inline_max: 0 } } }\n"
                                     "routes: [{ device: cpu, backend: gloo }]\n";
    groups = makeGroups(config, worldSize());
  }
  int worldSize() const { return std::get<0>(GetParam()); }
  void each(const std::function<void(ProcessGroup&, int)>& fn) {
    runRanks(worldSize(), [&](int r) { fn(*groups[r], r); });
  }
  std::vector<std::shared_ptr<ProcessGroup>> groups;
};

TEST_P(GlooWorld, AllreduceAndReduceEveryDTypeAndOp) {
  const int world = worldSize();
  constexpr int64_t n = 37;  // not a multiple of anything the algorithms chunk by
  each([&](ProcessGroup& pg, int rank) {
    for (int d = 0; d < kNumDTypes; ++d) {
      const auto dtype = static_cast<DType>(d);
      for (int k = 0; k < ReduceOp::kNumKinds; ++k) {
        const auto kind = static_cast<ReduceOp::Kind>(k);
        if (!valid(dtype, kind)) continue;
        const ReduceOp op = kind == ReduceOp::PreMulSum ? ReduceOp::preMulSum(0.5) : ReduceOp(kind);
        Tensor t = sourceTensor(dtype, rank, n);
        pg.allreduce(t, {op})->wait();
        Tensor red = sourceTensor(dtype, rank, n);
        const int root = world - 1;
        pg.reduce(red, {root, op})->wait();
        for (int64_t i = 0; i < n; ++i) {
          const double want = expected(dtype, kind, world, i);
          ASSERT_NEAR(load(t, i), want, tolerance(dtype) * std::max(1.0, std::fabs(want)))
              << "allreduce " << dtypeName(dtype) << " " << reduceOpName(kind) << " rank " << rank << " i " << i;
          if (rank == root) {
            ASSERT_NEAR(load(red, i), want, tolerance(dtype) * std::max(1.0, std::fabs(want)))
                << "reduce " << dtypeName(dtype) << " " << reduceOpName(kind);
          }
        }
      }
    }
  });
}

// Avg of f16 values whose sum overflows f16 (max 65504) but whose mean fits: Gloo folds
// through f16 partial sums, so the inputs are scaled first (kernels::pairwiseScale).
TEST_P(GlooWorld, HalfAvgOfLargeValuesDoesNotOverflow) {
  const int world = worldSize();
  each([&](ProcessGroup& pg, int rank) {
    constexpr int64_t n = 37;
    auto filled = [] {
      Tensor t = Tensor::empty({n}, DType::Float16);
      for (int64_t i = 0; i < n; ++i) kernels::setElement(t.data(), DType::Float16, i, 40000.0);
      return t;
    };
    for (const ReduceOp op : {ReduceOp(ReduceOp::Avg), ReduceOp::preMulSum(0.5 / world)}) {
      const double want = op.kind == ReduceOp::Avg ? 40000.0 : 20000.0;
      Tensor all = filled();
      pg.allreduce(all, {op})->wait();
      Tensor red = filled();
      pg.reduce(red, {world - 1, op})->wait();
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_NEAR(load(all, i), want, 0.01 * want) << "allreduce " << reduceOpName(op.kind) << " rank " << rank;
        if (rank == world - 1) {
          ASSERT_NEAR(load(red, i), want, 0.01 * want) << "reduce " << reduceOpName(op.kind) << " rank " << rank;
        }
      }
    }
  });
}

TEST_P(GlooWorld, EveryOtherOp) {
  const int world = worldSize();
  constexpr int64_t n = 13;
  auto v = [](int rank, int64_t i) { return static_cast<float>(rank * 1000 + i); };
  auto filled = [&](int rank, int64_t count) {
    Tensor t = Tensor::empty({count}, DType::Float32);
    for (int64_t i = 0; i < count; ++i) t.data_as<float>()[i] = v(rank, i);
    return t;
  };
  each([&](ProcessGroup& pg, int rank) {
    const int root = world / 2;
    Tensor b = filled(rank, n);
    pg.broadcast(b, {root})->wait();
    EXPECT_EQ(b.data_as<float>()[n - 1], v(root, n - 1));

    std::vector<Tensor> outs;
    outs.reserve(world);
    for (int r = 0; r < world; ++r) outs.push_back(Tensor::empty({n}, DType::Float32));
    pg.allgather(outs, filled(rank, n))->wait();
    for (int r = 0; r < world; ++r) EXPECT_EQ(outs[r].data_as<float>()[3], v(r, 3));

    Tensor flat = Tensor::empty({n * world}, DType::Float32);
    pg.allgatherIntoTensor(flat, filled(rank, n))->wait();
    EXPECT_EQ(flat.data_as<float>()[n * (world - 1) + 2], v(world - 1, 2));

    std::vector<std::vector<Tensor>> co(2);
    for (auto& list : co)
      for (int r = 0; r < world; ++r) list.push_back(Tensor::empty({n}, DType::Float32));
    pg.allgatherCoalesced(co, {filled(rank, n), filled(rank + 50, n)})->wait();
    EXPECT_EQ(co[1][world - 1].data_as<float>()[4], v(world - 1 + 50, 4));

    std::vector<Tensor> gathered;
    if (rank == root)
      for (int r = 0; r < world; ++r) gathered.push_back(Tensor::empty({n}, DType::Float32));
    pg.gather(gathered, filled(rank, n), {root})->wait();
    if (rank == root) {
      for (int r = 0; r < world; ++r) EXPECT_EQ(gathered[r].data_as<float>()[5], v(r, 5));
    }

    std::vector<Tensor> parts;
    if (rank == root)
      for (int r = 0; r < world; ++r) parts.push_back(filled(100 + r, n));
    Tensor mine = Tensor::empty({n}, DType::Float32);
    pg.scatter(mine, parts, {root})->wait();
    EXPECT_EQ(mine.data_as<float>()[6], v(100 + rank, 6));

    std::vector<Tensor> rsIn;
    rsIn.reserve(world);
    for (int r = 0; r < world; ++r) rsIn.push_back(filled(rank + r, n));
    Tensor rs = Tensor::empty({n}, DType::Float32);
    pg.reduceScatter(rs, rsIn)->wait();
    float want = 0;
    for (int s = 0; s < world; ++s) want += v(s + rank, 7);
    EXPECT_EQ(rs.data_as<float>()[7], want);

    Tensor rst = Tensor::empty({n}, DType::Float32);
    pg.reduceScatterTensor(rst, filled(rank, n * world), {ReduceOp::Max})->wait();
    EXPECT_EQ(rst.data_as<float>()[1], v(world - 1, rank * n + 1));

    std::vector<Tensor> a2aIn, a2aOut;
    for (int r = 0; r < world; ++r) {
      a2aIn.push_back(filled(rank * 10 + r, n));
      a2aOut.push_back(Tensor::empty({n}, DType::Float32));
    }
    pg.alltoall(a2aOut, a2aIn)->wait();
    for (int r = 0; r < world; ++r) EXPECT_EQ(a2aOut[r].data_as<float>()[2], v(r * 10 + rank, 2));

    // Uneven: rank s sends (d + 1) rows of 2 to rank d.
    AlltoallSingleOptions splits;
    int64_t inRows = 0;
    for (int d = 0; d < world; ++d) {
      splits.inputSplitSizes.push_back(d + 1);
      splits.outputSplitSizes.push_back(rank + 1);
      inRows += d + 1;
    }
    Tensor in = Tensor::empty({inRows, 2}, DType::Float32),
           out = Tensor::empty({(rank + 1) * world, 2}, DType::Float32);
    int64_t row = 0;
    for (int d = 0; d < world; ++d)
      for (int k = 0; k <= d; ++k, ++row)
        in.data_as<float>()[2 * row] = in.data_as<float>()[2 * row + 1] = rank * 10 + d;
    pg.alltoallSingle(out, in, splits)->wait();
    for (int s = 0; s < world; ++s) EXPECT_EQ(out.data_as<float>()[2 * s * (rank + 1) + 1], s * 10 + rank);

    pg.barrier()->wait();
    if (world > 1) {
      const int next = (rank + 1) % world, prev = (rank + world - 1) % world;
      Tensor got = Tensor::empty({n}, DType::Float32);
      auto sent = pg.send(filled(rank, n), next, {7});
      pg.recv(got, prev, {7})->wait();
      sent->wait();
      EXPECT_EQ(got.data_as<float>()[1], v(prev, 1));
      if (rank == 0) {
        for (int i = 1; i < world; ++i) {
          Tensor any = Tensor::empty({1}, DType::Float32);
          auto w = pg.recvAnySource(any, {9});
          w->wait();
          EXPECT_EQ(any.data_as<float>()[0], v(w->sourceRank(), 0));
        }
      } else {
        pg.send(filled(rank, 1), 0, {9})->wait();
      }
    }
    pg.monitoredBarrier();
  });
}

TEST(Gloo, InlineModeExchangesAndAnySourceErrors) {
  // threads: 0 runs collectives on the caller; p2p must still not deadlock.
  auto groups = makeGroups(
      "group: { timeout: 2s }\nbackends: { gloo: { options: { threads: 0 } } }\n"
      "routes: [{ device: cpu, backend: gloo }]\n",
      2);
  runRanks(2, [&](int r) {
    Tensor big = Tensor::empty({1 << 20}, DType::Float32), got = Tensor::empty({1 << 20}, DType::Float32);
    big.data_as<float>()[7] = static_cast<float>(r + 1);
    auto sent = groups[r]->send(big, 1 - r);
    groups[r]->recv(got, 1 - r)->wait();
    sent->wait();
    EXPECT_EQ(got.data_as<float>()[7], static_cast<float>(2 - r));
    Tensor t = Tensor::empty({3}, DType::Float32);
    groups[r]->allreduce(t)->wait();
  });
  // A receive from any source that nobody sends to fails with the real error.
  Tensor lonely = Tensor::empty({4}, DType::Float32);
  auto w = groups[0]->recvAnySource(lonely, {0, std::chrono::milliseconds(300)});
  EXPECT_THROW_WITH(w->wait(), Error, "recv_any_source seq");
  Tensor pending = Tensor::empty({4}, DType::Float32);
  auto aborted = groups[0]->recvAnySource(pending, {5, std::chrono::seconds(2)});
  groups[0]->abort("operator stop");
  EXPECT_THROW_WITH(aborted->wait(), AbortedError, "operator stop");
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, GlooWorld, ::testing::Combine(::testing::Values(1, 2, 3, 4, 5), ::testing::Bool()),
                         [](const auto& info) {
                           return "ranks" + std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "" : "Queued");
                         });

TEST(Gloo, SubgroupsGetTheirOwnContexts) {
  auto groups = makeGroups(kGlooConfig, 3);
  runRanks(3, [&](int r) {
    auto pair = groups[r]->newGroup({0, 2});
    auto split = groups[r]->split(r == 1 ? 0 : 1, r);
    if (pair) {
      Tensor t = Tensor::empty({5}, DType::Float32);
      t.data_as<float>()[4] = static_cast<float>(r + 1);
      pair->allreduce(t)->wait();
      EXPECT_EQ(t.data_as<float>()[4], 1 + 3);
    }
    ASSERT_NE(split, nullptr);
    Tensor s = Tensor::empty({2}, DType::Int64);
    s.data_as<int64_t>()[0] = r;
    split->allreduce(s, {ReduceOp::Max})->wait();
    EXPECT_EQ(s.data_as<int64_t>()[0], r == 1 ? 1 : 2);
    groups[r]->barrier()->wait();
  });
}

// Debian's Gloo walked an uninitialized pointer when a device name did not resolve (all
// ranks crashed on the second attempt of a swap to a mistyped interface): the backend
// resolves names itself and hands Gloo numeric addresses only.
TEST(Gloo, ADeviceThatIsNeitherAnInterfaceNorAHostIsAConfigErrorEveryTime) {
  const std::string config =
      "group: { timeout: 5s }\nbackends: { gloo: { options: { device: chadv_nodev0 } } }\n"
      "routes: [{ device: cpu, backend: gloo }]\n";
  for (int attempt = 0; attempt < 3; ++attempt) {
    SCOPED_TRACE("attempt " + std::to_string(attempt));
    // Refused where the config is loaded (gloo's checkOptions), before any backend exists.
    EXPECT_THROW_WITH(makeGroups(config, 2), ConfigError,
                      "'backends.gloo.options': device 'chadv_nodev0' is neither a network interface",
                      "Set it to an interface (ip -br link)");
  }
  // A resolvable name that is no address of this host is refused as well, naming what it
  // resolved to; a name of this host works and is used by its address.
  EXPECT_THROW_WITH(makeGroups("backends: { gloo: { options: { device: 192.0.2.1 } } }\n"
                               "routes: [{ device: cpu, backend: gloo }]\n",
                               2),
                    ConfigError, "resolves to 192.0.2.1, none of them an address of this host");
  auto groups = makeGroups(
      "group: { timeout: 20s }\nbackends: { gloo: { options: { device: localhost } } }\n"
      "routes: [{ device: cpu, backend: gloo }]\n",
      2);
  runRanks(2, [&](int r) {
    Tensor t = Tensor::empty({4}, DType::Float32);
    for (int i = 0; i < 4; ++i) t.data_as<float>()[i] = static_cast<float>(r + 1);
    groups[r]->allreduce(t)->wait();
    EXPECT_EQ(t.data_as<float>()[3], 3.0f);
  });
}

TEST(Gloo, AbortFailsWaitersAndLaterCalls) {
  // The aborted allreduce keeps its worker inside Gloo until Gloo's own timeout. Queued
  // (inline_max: 0): on the caller it would return only then.
  auto groups = makeGroups(
      "group: { timeout: 3s }\nbackends: { gloo: { options: { inline_max: 0 } } }\n"
      "routes: [{ device: cpu, backend: gloo }]\n",
      2);
  Tensor t = Tensor::empty({16}, DType::Float32);
  auto work = groups[0]->allreduce(t);  // rank 1 never joins
  groups[0]->abort("test abort");
  EXPECT_THROW_WITH(work->wait(), AbortedError, "test abort");
  EXPECT_THROW(groups[0]->allreduce(t), AbortedError);
}

// Gloo throws IoException both when an op's deadline passes and when a connection drops;
// the backend tells them apart by its own deadline, not by Gloo's wording. The
// supervisor is off, so what the works fail with is the backend's classification.
TEST(Gloo, ADeadlineIsATimeoutAndADroppedConnectionAPeerLoss) {
  // Gloo's collectives wait as long as the backend's context timeout (its `timeout`
  // option), whatever the op's own.
  const char* config =
      "group: { timeout: 20s }\nsupervisor: { enabled: false }\nbackends: { gloo: { options: { timeout: 2s } } }\n"
      "routes: [{ device: cpu, backend: gloo }]\n";
  auto groups = makeGroups(config, 2);
  Tensor t = Tensor::empty({16}, DType::Float32);
  // Rank 1 never joins: Gloo gives up after 2 s. The op is small and the backend idle, so
  // it ran on this thread, and the error says how to keep issuing from blocking.
  auto late = groups[0]->allreduce(t);
  EXPECT_TRUE(late->isCompleted()) << "a small op on an idle backend returns when done";
  EXPECT_THROW_WITH(late->wait(std::chrono::seconds(10)), TimeoutError, "[group main rank 0] allreduce seq 1", "(gloo)",
                    "A peer may not have joined", "ran on the calling thread", "backends.gloo.options.inline_max: 0");
  Tensor r = Tensor::empty({4}, DType::Float32);
  auto unsent = groups[0]->recv(r, 1, {0, std::chrono::milliseconds(300)});
  EXPECT_THROW_WITH(unsent->wait(std::chrono::seconds(10)), TimeoutError, "recv seq", "(gloo)");

  // Rank 1 goes away while rank 0 waits in an allreduce with 20 s to go: its closed
  // connections fail rank 0's op long before the deadline, as a lost peer, named; queued
  // or run on the caller alike.
  for (const char* inlineMax : {"0", "64KiB"}) {
    SCOPED_TRACE(std::string("inline_max ") + inlineMax);
    auto pair = makeGroups(std::string("group: { timeout: 20s }\nsupervisor: { enabled: false }\n") +
                               "backends: { gloo: { options: { inline_max: " + inlineMax + " } } }\n" +
                               "routes: [{ device: cpu, backend: gloo }]\n",
                           2);
    WorkPtr waiting;
    std::thread caller([&] { waiting = pair[0]->allreduce(t); });  // inline: returns only at the loss
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    pair[1].reset();
    caller.join();
    EXPECT_THROW_WITH(waiting->wait(std::chrono::seconds(10)), PeerLostError, "allreduce seq 1 (peer 1)",
                      "peer 1 lost: (gloo)");
  }
}

// A collective on its caller's thread waits inside Gloo, which nothing but a failed
// connection ends before Gloo's timeout: abort() (what the supervisor calls for a lost
// peer) ends it at once, with the abort's reason, also with threads: 0.
TEST(Gloo, AbortEndsAnOpRunningOnItsCaller) {
  for (const char* options : {"{}", "{ threads: 0 }"}) {
    SCOPED_TRACE(options);
    auto groups = makeGroups(std::string("group: { timeout: 60s }\nsupervisor: { enabled: false }\n") +
                                 "backends: { gloo: { options: " + options + " } }\n" +
                                 "routes: [{ device: cpu, backend: gloo }]\n",
                             2);
    Tensor t = Tensor::empty({4}, DType::Float32);
    WorkPtr work;
    std::thread caller([&] { work = groups[0]->allreduce(t); });  // rank 1 never joins
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const auto aborted = std::chrono::steady_clock::now();
    groups[0]->abort("peer 1 lost (test)");
    caller.join();
    EXPECT_LT(std::chrono::steady_clock::now() - aborted, std::chrono::seconds(20)) << "not Gloo's 60 s timeout";
    EXPECT_THROW_WITH(work->wait(), AbortedError, "allreduce seq 1", "peer 1 lost (test)", "calling thread");
    EXPECT_THROW(groups[0]->allreduce(t), AbortedError);
  }
}

// inline_max: a small collective on an idle backend runs on its caller and returns done;
// one above it, or one whose deadline is shorter than Gloo's wait (it could not give up
// on time), is queued and returns at once, so its rank may issue it before its peer.
TEST(Gloo, OnlySmallOpsOnAnIdleBackendRunOnTheCaller) {
  auto groups = makeGroups(
      "group: { timeout: 20s }\nbackends: { gloo: { options: { inline_max: 1KiB } } }\n"
      "routes: [{ device: cpu, backend: gloo }]\n",
      2);
  runRanks(2, [&](int r) {
    Tensor small = Tensor::empty({256}, DType::Float32);  // 1 KiB
    std::fill_n(small.data_as<float>(), 256, static_cast<float>(r + 1));
    auto work = groups[r]->allreduce(small);
    EXPECT_TRUE(work->isCompleted()) << "rank " << r;
    work->wait();
    EXPECT_EQ(small.data_as<float>()[255], 3.0f);
  });
  auto issueFirst = [&](Tensor t, AllreduceOptions opts) {
    auto first = groups[0]->allreduce(t, opts);
    EXPECT_FALSE(first->isCompleted()) << "queued, so rank 0 issued it before rank 1";
    Tensor other = Tensor::empty(t.shape(), DType::Float32);
    groups[1]->allreduce(other, opts)->wait();
    first->wait();
  };
  issueFirst(Tensor::empty({257}, DType::Float32), {});  // 1028 bytes
  AllreduceOptions shortDeadline;
  shortDeadline.timeout = std::chrono::seconds(10);
  issueFirst(Tensor::empty({4}, DType::Float32), shortDeadline);
}

}  // namespace
}  // namespace commhost::test
