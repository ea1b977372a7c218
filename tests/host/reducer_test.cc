// SPDX-License-Identifier: Apache-2.0
// The Reducer over real groups (gloo, ranks as threads over a HashStore): bucket
// assignment as c10d computes it, averaged gradients, concurrent markReady, overlap,
// the rebuild, unused parameters, static graph, gradient-as-bucket-view, and its errors.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <thread>
#include <utility>

#include "commhost/mutex.h"
#include "test_util.h"

namespace commhost::test {
namespace {

const char* kGlooConfig =
    "group: { timeout: 20s }\n"
    "backends: { gloo: { options: { threads: 2 } } }\n"
    "routes: [{ device: cpu, backend: gloo }]\n";

// The average allreduce, written here over the group (the hook plugins live elsewhere).
// It records which buckets it was handed, and their Futures, for the tests to look at.
class AverageHook : public CommHook {
 public:
  FuturePtr runHook(GradBucket& bucket) override {
    EXPECT_EQ(bucket.gradients.size(), bucket.params.size());
    EXPECT_EQ(bucket.offsets.size(), bucket.params.size());
    Tensor buffer = bucket.buffer;
    FuturePtr future = bucket.group->allreduce(buffer, {ReduceOp::Avg})->future()->then([buffer](Future&) {
      return std::vector<Tensor>{buffer};
    });
    MutexLock lock(&mu_);
    launched_.push_back(bucket.index);
    futures_.push_back(future);
    return future;
  }
  std::vector<size_t> launched() {
    MutexLock lock(&mu_);
    return launched_;
  }
  FuturePtr future(size_t k) {
    MutexLock lock(&mu_);
    return futures_.at(k);
  }

 private:
  Mutex mu_;
  std::vector<size_t> launched_ GUARDED_BY(mu_);
  std::vector<FuturePtr> futures_ GUARDED_BY(mu_);
};

ParamInfo f32(std::initializer_list<int64_t> dims, std::string name = "") {
  return {Shape(dims), DType::Float32, Device::cpu(), std::move(name)};
}
ParamInfo f64(std::initializer_list<int64_t> dims) { return {Shape(dims), DType::Float64, Device::cpu(), ""}; }

// Rank r's gradient element j of parameter i in iteration `it`; the mean over ranks is
// meanValue().
float gradValue(int rank, size_t i, int64_t j, int it) { return static_cast<float>((rank + 1) * (i + 1) + j + it); }
float meanValue(int world, size_t i, int64_t j, int it) {
  return static_cast<float>((world + 1) / 2.0 * (i + 1) + j + it);
}

Tensor gradFor(const ParamInfo& p, int rank, size_t i, int it) {
  Tensor t = Tensor::empty(p.shape, p.dtype);
  for (int64_t j = 0; j < t.numel(); ++j) t.data_as<float>()[j] = gradValue(rank, i, j, it);
  return t;
}

void expectMean(const Tensor& t, int world, size_t i, int it, const std::string& what) {
  for (int64_t j = 0; j < t.numel(); ++j)
    ASSERT_FLOAT_EQ(t.data_as<float>()[j], meanValue(world, i, j, it)) << what << " param " << i << " element " << j;
}

struct World {
  explicit World(int n) : size(n), groups(makeGroups(kGlooConfig, n)) {
    for (int r = 0; r < n; ++r) hooks.push_back(std::make_shared<AverageHook>());
  }
  ReducerOptions options(int rank, ReducerOptions o = {}) const {
    o.hook = hooks[rank];
    return o;
  }
  int size;
  std::vector<std::shared_ptr<ProcessGroup>> groups;
  std::vector<std::shared_ptr<AverageHook>> hooks;
};

// ---- bucket assignment -----------------------------------------------------------

TEST(BucketAssignment, ReverseOrderFirstBucketCapThenTheRest) {
  // Six 400-byte parameters, caps {500, 1000}: visited 5, 4, ...; the first bucket closes
  // at 800 >= 500, the next at 1200 >= 1000; parameter 0 is left over.
  std::vector<ParamInfo> params(6, f32({100}));
  EXPECT_EQ(computeBucketAssignmentBySize(params, {500, 1000}),
            (std::vector<std::vector<size_t>>{{5, 4}, {3, 2, 1}, {0}}));
  // One cap for every bucket.
  EXPECT_EQ(computeBucketAssignmentBySize(params, {800}), (std::vector<std::vector<size_t>>{{5, 4}, {3, 2}, {1, 0}}));
  EXPECT_EQ(computeBucketAssignmentBySize(params, {1 << 30}), (std::vector<std::vector<size_t>>{{5, 4, 3, 2, 1, 0}}));
}

TEST(BucketAssignment, MixedDTypesBucketApartEachWithItsOwnCaps) {
  // f32 40 B at 0, 2, 4; f64 80 B at 1, 3; caps {50, 100}. Visiting 4, 3, 2, 1, 0: f64's
  // first bucket closes at 3 (80 >= 50), f32's at 2 (80 >= 50); then both groups are on
  // the 100-byte cap and 1 and 0 are left over. Sorted by descending smallest index.
  std::vector<ParamInfo> params = {f32({10}), f64({10}), f32({10}), f64({10}), f32({10})};
  EXPECT_EQ(computeBucketAssignmentBySize(params, {50, 100}),
            (std::vector<std::vector<size_t>>{{3}, {4, 2}, {1}, {0}}));
  // An explicit order (the rebuild's) keeps the closing order; leftovers follow, by
  // group in order of first appearance.
  EXPECT_EQ(computeBucketAssignmentBySize(params, {50, 100}, {0, 1, 2, 3, 4}),
            (std::vector<std::vector<size_t>>{{1}, {0, 2}, {4}, {3}}));
  EXPECT_THROW_WITH(computeBucketAssignmentBySize(params, {50}, {0, 1, 1, 3, 4}), InvalidArgument, "permutation");
  EXPECT_THROW_WITH(computeBucketAssignmentBySize(params, {}), InvalidArgument, "no bucket caps");
}

// ---- reduction -------------------------------------------------------------------

std::vector<ParamInfo> mlpParams() {
  return {f32({8, 4}, "fc1.weight"), f32({8}, "fc1.bias"), f32({3, 8}, "fc2.weight"), f32({3}, "fc2.bias"),
          f32({16}, "head")};
}

TEST(Reducer, AveragesGradientsOverRanksForSeveralIterations) {
  for (int n : {2, 3}) {
    World world(n);
    const auto params = mlpParams();
    runRanks(n, [&](int rank) {
      ReducerOptions o;
      o.firstBucketCapBytes = 64;
      o.bucketCapBytes = 128;
      Reducer reducer(world.groups[rank], params, world.options(rank, o));
      for (int it = 0; it < 4; ++it) {
        reducer.prepareForBackward();
        std::vector<Tensor> grads;
        for (size_t i = 0; i < params.size(); ++i) grads.push_back(gradFor(params[i], rank, i, it));
        for (size_t i = params.size(); i-- > 0;) reducer.markReady(i, grads[i]);
        reducer.finalize();
        for (size_t i = 0; i < params.size(); ++i) expectMean(grads[i], n, i, it, "iteration " + std::to_string(it));
        const ReducerStats& s = reducer.stats();
        EXPECT_EQ(s.iteration, static_cast<uint64_t>(it + 1));
        EXPECT_EQ(s.rebuilt, it >= 1);
        EXPECT_GT(s.buckets.size(), 1u);
        EXPECT_EQ(s.launch.size(), s.buckets.size());
        EXPECT_EQ(s.comm.size(), s.buckets.size());
        EXPECT_EQ(s.bytes, (32 + 8 + 24 + 3 + 16) * 4);
        for (auto t : s.ready) EXPECT_GE(t.count(), 0);
        EXPECT_GE(s.backward.count(), 0);
      }
    });
  }
}

TEST(Reducer, ReconfigureDuringAnIterationIsRefusedOnEveryRankAndWorksAfterFinalize) {
  constexpr int n = 2;
  World world(n);
  const auto params = mlpParams();
  auto registry = testRegistry();
  auto again = configFrom(kGlooConfig, *registry);
  runRanks(n, [&](int rank) {
    ProcessGroup& pg = *world.groups[rank];
    for (int round = 0; round < 2; ++round) {
      Reducer reducer(world.groups[rank], params, world.options(rank));
      reducer.prepareForBackward();
      // The hook may be issuing on markReady threads now: the swap would pull the
      // backends from under them.
      EXPECT_THROW_WITH(pg.reconfigure(again), ConfigError, "during a Reducer iteration",
                        "call reconfigure() (or syncPoint()) between iterations");
      std::vector<Tensor> grads;
      for (size_t i = 0; i < params.size(); ++i) grads.push_back(gradFor(params[i], rank, i, 0));
      for (size_t i = params.size(); i-- > 0;) reducer.markReady(i, grads[i]);
      if (round == 0) reducer.finalize();  // round 1: destroyed mid-iteration, which ends the span too
    }
    EXPECT_EQ(pg.generation(), 0u);
    EXPECT_EQ(pg.reconfigure(again).generation, 1u);
  });
}

TEST(Reducer, MarkReadyFromSeveralThreadsInShuffledOrder) {
  constexpr int n = 2;
  World world(n);
  std::vector<ParamInfo> params;
  for (int i = 0; i < 24; ++i) params.push_back(f32({5 + i % 7}));
  runRanks(n, [&](int rank) {
    ReducerOptions o;
    o.firstBucketCapBytes = 40;
    o.bucketCapBytes = 100;
    Reducer reducer(world.groups[rank], params, world.options(rank, o));
    std::mt19937 rng(1234 + rank);
    for (int it = 0; it < 3; ++it) {
      reducer.prepareForBackward();
      std::vector<Tensor> grads;
      for (size_t i = 0; i < params.size(); ++i) grads.push_back(gradFor(params[i], rank, i, it));
      std::vector<size_t> order(params.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::shuffle(order.begin(), order.end(), rng);
      std::vector<std::thread> threads;
      for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
          for (size_t k = t; k < order.size(); k += 4) reducer.markReady(order[k], grads[order[k]]);
        });
      for (auto& t : threads) t.join();
      reducer.finalize();
      for (size_t i = 0; i < params.size(); ++i) expectMean(grads[i], n, i, it, "iteration " + std::to_string(it));
      // Every bucket went to the hook once, in index order.
      auto launched = world.hooks[rank]->launched();
      const size_t nb = reducer.stats().buckets.size();
      ASSERT_GE(launched.size(), nb);
      for (size_t b = 0; b < nb; ++b) EXPECT_EQ(launched[launched.size() - nb + b], b);
    }
  });
}

TEST(Reducer, FirstBucketIsOnTheWireBeforeTheLastGradientIsMarked) {
  constexpr int n = 2;
  World world(n);
  std::vector<ParamInfo> params(4, f32({256}));  // 1 KiB each
  runRanks(n, [&](int rank) {
    ReducerOptions o;
    o.firstBucketCapBytes = 1024;
    o.bucketCapBytes = 1024;
    Reducer reducer(world.groups[rank], params, world.options(rank, o));
    reducer.prepareForBackward();
    std::vector<Tensor> grads;
    for (size_t i = 0; i < params.size(); ++i) grads.push_back(gradFor(params[i], rank, i, 0));
    reducer.markReady(3, grads[3]);  // bucket 0 = {3}: handed to the hook by this call
    ASSERT_EQ(world.hooks[rank]->launched(), std::vector<size_t>{0});
    // Its allreduce completes (every rank launched it) while 0, 1 and 2 are still to come.
    world.hooks[rank]->future(0)->wait(std::chrono::seconds(10));
    reducer.markReady(1, grads[1]);  // bucket 2 complete, but bucket 1 is not: it waits
    ASSERT_EQ(world.hooks[rank]->launched().size(), 1u);
    reducer.markReady(2, grads[2]);  // buckets 1 and 2 go, in order
    ASSERT_EQ(world.hooks[rank]->launched(), (std::vector<size_t>{0, 1, 2}));
    reducer.markReady(0, grads[0]);
    reducer.finalize();
    for (size_t i = 0; i < params.size(); ++i) expectMean(grads[i], n, i, 0, "overlap");
    EXPECT_LT(reducer.stats().launch[0], reducer.stats().ready[0]);
  });
}

TEST(Reducer, RebuildFollowsRankZerosReadyOrderOnEveryRank) {
  constexpr int n = 3;
  World world(n);
  std::vector<ParamInfo> params(6, f32({25}));  // 100 B each
  const std::vector<size_t> rank0Order = {0, 2, 4, 1, 3, 5};
  const std::vector<int64_t> caps = {150, 250};
  for (bool rebuild : {true, false}) {
    std::vector<std::vector<std::vector<size_t>>> seen(n);
    runRanks(n, [&](int rank) {
      ReducerOptions o;
      o.firstBucketCapBytes = caps[0];
      o.bucketCapBytes = caps[1];
      o.rebuildBuckets = rebuild;
      Reducer reducer(world.groups[rank], params, world.options(rank, o));
      std::mt19937 rng(99 + rank);
      for (int it = 0; it < 3; ++it) {
        std::vector<size_t> order = rank0Order;
        if (rank != 0) std::shuffle(order.begin(), order.end(), rng);
        reducer.prepareForBackward();
        std::vector<Tensor> grads;
        for (size_t i = 0; i < params.size(); ++i) grads.push_back(gradFor(params[i], rank, i, it));
        for (size_t i : order) reducer.markReady(i, grads[i]);
        reducer.finalize();
        for (size_t i = 0; i < params.size(); ++i) expectMean(grads[i], n, i, it, "iteration " + std::to_string(it));
        if (it == 0) {
          EXPECT_EQ(reducer.stats().buckets, computeBucketAssignmentBySize(params, caps));
        }
      }
      EXPECT_EQ(reducer.stats().rebuilt, rebuild);
      seen[rank] = reducer.stats().buckets;
    });
    const auto want = rebuild ? computeBucketAssignmentBySize(params, caps, rank0Order)
                              : computeBucketAssignmentBySize(params, caps);
    for (int r = 0; r < n; ++r) EXPECT_EQ(seen[r], want) << "rank " << r << " rebuild " << rebuild;
  }
}

// ---- unused parameters -----------------------------------------------------------

// Parameter 2 is unused on rank 1 only, parameter 3 on every rank.
void runUnused(bool staticGraph, bool asView) {
  constexpr int n = 2;
  World world(n);
  std::vector<ParamInfo> params(4, f32({6}));
  runRanks(n, [&](int rank) {
    ReducerOptions o;
    o.firstBucketCapBytes = 1;  // one parameter per bucket
    o.bucketCapBytes = 1;
    o.findUnusedParameters = !staticGraph;
    o.staticGraph = staticGraph;
    o.gradientAsBucketView = asView;
    o.rebuildBuckets = false;  // keep bucket k = {3 - k}
    Reducer reducer(world.groups[rank], params, world.options(rank, o));
    for (int it = 0; it < 3; ++it) {
      const uint64_t seqBefore = world.groups[rank]->seq();
      const size_t launchedBefore = world.hooks[rank]->launched().size();
      reducer.prepareForBackward();
      if (staticGraph && it > 0) {
        // Known-unused parameters' buckets go at once: {3} on both ranks, then {2} on rank 1.
        EXPECT_EQ(world.hooks[rank]->launched().size() - launchedBefore, rank == 1 ? 2u : 1u);
      }
      if (asView) {
        // The workload's gradient of parameter 3 (no rank marks it): finalize must leave it.
        Tensor untouched = reducer.bucketView(3);
        for (int64_t j = 0; j < 6; ++j) untouched.data_as<float>()[j] = 7.0f;
      }
      std::vector<Tensor> grads;
      for (size_t i = 0; i < 3; ++i) {
        if (rank == 1 && i == 2) continue;
        Tensor g = gradFor(params[i], rank, i, it);
        if (asView) {
          Tensor v = reducer.bucketView(i);
          std::copy(g.data_as<float>(), g.data_as<float>() + 6, v.data_as<float>());
          g = v;
        }
        grads.push_back(g);
        reducer.markReady(i, g);
      }
      reducer.finalize();
      const std::string what = "iteration " + std::to_string(it) + " rank " + std::to_string(rank);
      expectMean(grads[0], n, 0, it, what);
      expectMean(grads[1], n, 1, it, what);
      // Parameter 2: rank 0's gradient averaged with rank 1's zero; rank 1 reads it in its view.
      const Tensor p2 = rank == 0 ? grads[2] : reducer.bucketView(2);
      for (int64_t j = 0; j < 6; ++j)
        ASSERT_FLOAT_EQ(p2.data_as<float>()[j], gradValue(0, 2, j, it) / 2) << what << " element " << j;
      if (asView) {
        for (int64_t j = 0; j < 6; ++j) ASSERT_EQ(reducer.bucketView(3).data_as<float>()[j], 7.0f) << what;
      }
      EXPECT_EQ(reducer.stats().ready[3].count(), -1);
      // The bitmap allreduce: every iteration without static graph, the first one with it.
      const uint64_t ops = world.groups[rank]->seq() - seqBefore;
      EXPECT_EQ(ops, 4u + (staticGraph && it > 0 ? 0u : 1u)) << what;
    }
  });
}

TEST(Reducer, FindUnusedParametersCountsThemAsZeroAndLeavesUnusedEverywhereUntouched) { runUnused(false, false); }
TEST(Reducer, FindUnusedParametersWithGradientAsBucketView) { runUnused(false, true); }
TEST(Reducer, StaticGraphAgreesOnceAndLaunchesKnownUnusedBucketsAtPrepare) { runUnused(true, false); }

TEST(Reducer, StaticGraphRefusesAParameterThatWasUnusedInTheFirstIteration) {
  World world(1);
  std::vector<ParamInfo> params(2, f32({3}));
  ReducerOptions o = world.options(0);
  o.staticGraph = true;
  Reducer reducer(world.groups[0], params, o);
  Tensor g = Tensor::empty({3}, DType::Float32);
  reducer.prepareForBackward();
  reducer.markReady(0, g);
  reducer.finalize();
  reducer.prepareForBackward();
  EXPECT_THROW_WITH(reducer.markReady(1, g), InvalidArgument, "param 1", "unused in the first iteration",
                    "staticGraph");
  reducer.markReady(0, g);
  reducer.finalize();
}

TEST(Reducer, GradientAsBucketViewLeavesTheResultInTheBucket) {
  constexpr int n = 2;
  World world(n);
  const auto params = mlpParams();
  runRanks(n, [&](int rank) {
    ReducerOptions o;
    o.firstBucketCapBytes = 64;
    o.bucketCapBytes = 128;
    o.gradientAsBucketView = true;
    Reducer reducer(world.groups[rank], params, world.options(rank, o));
    for (int it = 0; it < 3; ++it) {
      reducer.prepareForBackward();
      for (size_t i = params.size(); i-- > 0;) {
        Tensor view = reducer.bucketView(i);  // fetched every iteration: the rebuild moves it
        ASSERT_EQ(view.shape(), params[i].shape);
        Tensor g = gradFor(params[i], rank, i, it);
        std::copy(g.data_as<float>(), g.data_as<float>() + g.numel(), view.data_as<float>());
        reducer.markReady(i, view);
      }
      reducer.finalize();
      for (size_t i = 0; i < params.size(); ++i)
        expectMean(reducer.bucketView(i), n, i, it, "iteration " + std::to_string(it));
    }
  });
}

// ---- errors ----------------------------------------------------------------------

TEST(ReducerErrors, MarkReadyMisuseNamesTheParameterGroupAndRank) {
  World world(1);
  std::vector<ParamInfo> params = {f32({2, 3}, "w"), f32({3}, "b")};
  Reducer reducer(world.groups[0], params, world.options(0));
  Tensor w = Tensor::empty({2, 3}, DType::Float32);
  Tensor b = Tensor::empty({3}, DType::Float32);
  EXPECT_THROW_WITH(reducer.markReady(0, w), InvalidArgument, "param 0 'w'", "outside an iteration",
                    "prepareForBackward");
  reducer.prepareForBackward();
  EXPECT_THROW_WITH(reducer.prepareForBackward(), InvalidArgument, "rank 0", "unfinished", "finalize()");
  EXPECT_THROW_WITH(reducer.markReady(2, w), InvalidArgument, "rank 0", "index 2 is out of range", "2 parameters");
  EXPECT_THROW_WITH(reducer.markReady(0, Tensor::empty({3, 2}, DType::Float32)), InvalidArgument, "param 0 'w'",
                    "f32[3, 2]", "f32[2, 3]");
  EXPECT_THROW_WITH(reducer.markReady(1, Tensor::empty({3}, DType::Float64)), InvalidArgument, "param 1 'b'", "f64[3]",
                    "dtype");
  float cudaLike[3];
  EXPECT_THROW_WITH(reducer.markReady(1, Tensor::fromBlob(cudaLike, {3}, DType::Float32, Device::cuda(0))),
                    InvalidArgument, "param 1 'b'", "cuda:0");
  reducer.markReady(1, b);
  EXPECT_THROW_WITH(reducer.markReady(1, b), InvalidArgument, "[group", "rank 0]", "param 1 'b'", "marked ready twice",
                    "once per parameter");
  reducer.markReady(0, w);
  reducer.finalize();
}

TEST(ReducerErrors, FinalizeBeforeEveryBucketListsTheUnmarkedParameters) {
  World world(1);
  std::vector<ParamInfo> params = {f32({4}, "a"), f32({4}, "b"), f32({4}, "c")};
  ReducerOptions o = world.options(0);
  o.firstBucketCapBytes = 1;
  o.bucketCapBytes = 1;
  Reducer reducer(world.groups[0], params, o);
  Tensor g = Tensor::empty({4}, DType::Float32);
  reducer.prepareForBackward();
  reducer.markReady(2, g);
  EXPECT_THROW_WITH(reducer.finalize(), InvalidArgument, "rank 0", "1 of 3 buckets were launched",
                    "param 0 'a', param 1 'b'", "findUnusedParameters");
  // The iteration was abandoned: the next one works.
  reducer.prepareForBackward();
  for (size_t i = 0; i < 3; ++i) reducer.markReady(i, g);
  reducer.finalize();
  EXPECT_THROW_WITH(reducer.finalize(), InvalidArgument, "without prepareForBackward");
}

// A hook that fails bucket 1 once: by throwing (the first time) or through its Future.
// A hook that issues its allreduce from a thread of its own after `delay` (as powersgd's
// worker does), completing the Future when it is done.
class ThreadedAverageHook : public CommHook {
 public:
  explicit ThreadedAverageHook(std::chrono::milliseconds delay) : delay_(delay) {}
  ~ThreadedAverageHook() override {
    for (auto& t : threads_) t.join();
  }
  FuturePtr runHook(GradBucket& bucket) override {
    FuturePtr future = Future::create();
    Tensor buffer = bucket.buffer;
    ProcessGroup* group = bucket.group;
    FuturePtr previous = std::exchange(last_, future);
    threads_.emplace_back([this, future, previous, buffer, group]() mutable {
      // Buckets in order, one at a time: the previous bucket's allreduce goes first.
      if (previous) {
        try {
          previous->wait();
        } catch (...) {
        }
      }
      std::this_thread::sleep_for(delay_);
      try {
        group->allreduce(buffer, {ReduceOp::Avg})->wait();
        future->setValue({buffer});
      } catch (...) {
        future->setError(std::current_exception());
      }
    });
    return future;
  }

 private:
  std::chrono::milliseconds delay_;
  // runHook is called by one launching thread at a time.
  std::vector<std::thread> threads_;
  FuturePtr last_;  // the Future of the bucket launched last
};

// The unused-parameter bitmap allreduce waits for every bucket's Future: with a hook that
// communicates from its own thread, ranks whose hooks run late would otherwise issue the
// bitmap before their last bucket and the others after it (different op orders).
TEST(Reducer, UnusedBitmapWaitsForHooksThatCommunicateFromTheirOwnThread) {
  constexpr int kWorld = 2;
  auto groups = makeGroups(kGlooConfig, kWorld);
  const std::vector<ParamInfo> params = {f32({16}), f32({16}), f32({16})};
  runRanks(kWorld, [&](int rank) {
    ReducerOptions o;
    o.firstBucketCapBytes = 64;
    o.bucketCapBytes = 64;  // one parameter per bucket
    o.findUnusedParameters = true;
    o.rebuildBuckets = false;
    // Rank 1's hook is late: without the wait it issues the bitmap first, rank 0 last.
    o.hook = std::make_shared<ThreadedAverageHook>(std::chrono::milliseconds(rank == 1 ? 100 : 0));
    Reducer reducer(groups[rank], params, o);
    for (int it = 0; it < 3; ++it) {
      reducer.prepareForBackward();
      std::vector<Tensor> grads;
      for (size_t i = 0; i < params.size(); ++i) grads.push_back(gradFor(params[i], rank, i, it));
      for (size_t i = params.size(); i-- > 0;) reducer.markReady(i, grads[i]);
      reducer.finalize();
      for (size_t i = 0; i < params.size(); ++i) expectMean(grads[i], kWorld, i, it, "iteration " + std::to_string(it));
    }
  });
}

class FailingHook : public CommHook {
 public:
  explicit FailingHook(bool throws) : throws_(throws) {}
  FuturePtr runHook(GradBucket& bucket) override {
    if (bucket.index == 1 && !failed_.exchange(true)) {
      BackendError error("bucket 1 failed in the hook");
      if (throws_) throw error;
      auto future = Future::create();
      future->setError(std::make_exception_ptr(error));
      return future;
    }
    return Future::completed({bucket.buffer});
  }

 private:
  bool throws_;
  std::atomic<bool> failed_{false};
};

TEST(ReducerErrors, FinalizeThrowsTheHooksErrorAndTheNextIterationWorks) {
  for (bool throws : {true, false}) {
    World world(1);
    std::vector<ParamInfo> params(3, f32({4}));
    ReducerOptions o;
    o.firstBucketCapBytes = 1;
    o.bucketCapBytes = 1;
    o.hook = std::make_shared<FailingHook>(throws);
    Reducer reducer(world.groups[0], params, o);
    std::vector<Tensor> grads;
    for (size_t i = 0; i < 3; ++i) grads.push_back(gradFor(params[i], 0, i, 0));
    reducer.prepareForBackward();
    for (size_t i = 0; i < 3; ++i) reducer.markReady(i, grads[i]);
    EXPECT_THROW_WITH(reducer.finalize(), BackendError, "bucket 1 failed in the hook");
    reducer.prepareForBackward();
    for (size_t i = 0; i < 3; ++i) reducer.markReady(i, grads[i]);
    reducer.finalize();
    for (size_t i = 0; i < 3; ++i) expectMean(grads[i], 1, i, 0, throws ? "throwing hook" : "failed Future");
  }
}

TEST(ReducerErrors, NoHookSaysToUseMakeCommHook) {
  World world(1);
  EXPECT_THROW_WITH(Reducer(world.groups[0], {f32({2})}, ReducerOptions{}), InvalidArgument, "rank 0", "hook",
                    "makeCommHook(group)");
}

TEST(ReducerErrors, RanksThatDisagreeOnTheParametersAreNamed) {
  constexpr int n = 3;
  World world(n);
  auto paramsOf = [](int rank) {
    std::vector<ParamInfo> p = {f32({4}), f32({2, 3}), f32({5}, "bias")};
    if (rank == 1) p[2].shape = Shape{6};
    return p;
  };
  runRanks(n, [&](int rank) {
    const std::string self = "rank " + std::to_string(rank) + "]";
    EXPECT_THROW_WITH(Reducer(world.groups[rank], paramsOf(rank), world.options(rank)), InvalidArgument, self.c_str(),
                      "param 2 'bias' differs", "ranks 0, 2 have f32[5]", "rank 1 has f32[6]", "same parameters");
  });
  // A different count: the missing parameter is named, and the counts.
  runRanks(n, [&](int rank) {
    auto p = paramsOf(0);
    if (rank == 2) p.push_back(f32({1}));
    if (rank == 0) p[0].dtype = DType::Float64;
    EXPECT_THROW_WITH(Reducer(world.groups[rank], p, world.options(rank)), InvalidArgument, "param 0 differs",
                      "rank 0 has f64[4]", "ranks 1, 2 have f32[4]", "rank 2: 4");
  });
  runRanks(n, [&](int rank) {
    auto p = paramsOf(0);
    if (rank == 2) p.push_back(f32({1}));
    EXPECT_THROW_WITH(Reducer(world.groups[rank], p, world.options(rank)), InvalidArgument, "param 3 differs",
                      "ranks 0, 1 have no such parameter", "rank 2 has f32[1]");
  });
}

// In a subgroup the ranks are named by their group rank and their global one, which is
// what the launcher's output and the logs use.
TEST(ReducerErrors, ASubgroupsDisagreementNamesGlobalRanksToo) {
  constexpr int n = 4;
  World world(n);
  runRanks(n, [&](int rank) {
    auto sub = world.groups[rank]->newGroup({1, 3});
    if (!sub) return;
    std::vector<ParamInfo> p = {f32({4}), f32({5}, "bias")};
    if (rank == 3) p[1].shape = Shape{6};
    EXPECT_THROW_WITH(Reducer(sub, p, world.options(rank)), InvalidArgument, "param 1 'bias' differs",
                      "rank 0 (global 1) has f32[5]", "rank 1 (global 3) has f32[6]");
  });
}

}  // namespace
}  // namespace commhost::test
