// SPDX-License-Identifier: Apache-2.0
// Reducer overhead: one training step's gradients through the Reducer (prepareForBackward,
// markReady for every parameter, finalize, with an average-allreduce hook) against one
// plain allreduce of the same bytes, on gloo with ranks as threads over a HashStore.
// Arguments: world size, total gradient bytes (and for the Reducer its first bucket's
// cap). The parameters are 8 f32 tensors of equal size; bucketCapBytes is the default
// 25 MiB, so a first cap of 1 MiB gives 2 buckets (two allreduces) and one of 64 MiB a
// single bucket: the Reducer's own cost (copies in and out, bookkeeping) alone. The last
// argument sets gradientAsBucketView (gradients written in place: no copies).
//
//   build/tests/bench/commhost_bench_reducer --benchmark_min_time=2
#include <benchmark/benchmark.h>

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "commhost/commhost.h"

namespace {

using namespace commhost;

class AverageHook : public CommHook {
 public:
  FuturePtr runHook(GradBucket& bucket) override {
    Tensor buffer = bucket.buffer;
    return bucket.group->allreduce(buffer, {ReduceOp::Avg})->future()->then([buffer](Future&) {
      return std::vector<Tensor>{buffer};
    });
  }
};

// Ranks 1..n-1 on threads of their own that run each step the benchmark thread (rank 0)
// starts, so no thread is created per step.
class Ranks {
 public:
  explicit Ranks(int world) : world_(world) {
    for (int r = 1; r < world; ++r)
      threads_.emplace_back([this, r] {
        uint64_t seen = 0;
        for (;;) {
          std::function<void(int)> fn;
          {
            std::unique_lock<std::mutex> lock(mu_);
            cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
            if (stop_) return;
            seen = generation_;
            fn = fn_;
          }
          fn(r);
          std::lock_guard<std::mutex> lock(mu_);
          if (--running_ == 0) cv_.notify_all();
        }
      });
  }
  ~Ranks() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  void run(const std::function<void(int)>& fn) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      fn_ = fn;
      running_ = world_ - 1;
      ++generation_;
    }
    cv_.notify_all();
    fn(0);
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return running_ == 0; });
  }

 private:
  int world_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void(int)> fn_;
  uint64_t generation_ = 0;
  int running_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

std::vector<std::shared_ptr<ProcessGroup>> glooGroups(Ranks& ranks, int world) {
  auto registry = std::make_shared<PluginRegistry>();
  registry->scan(PluginRegistry::searchPath({}));
  ConfigOverrides overrides;
  overrides.fromEnvironment = false;
  auto config = std::make_shared<Config>(
      loadConfigText("group: { timeout: 30s }\nbackends: { gloo: { options: { threads: 1 } } }\n"
                     "routes: [{ device: cpu, backend: gloo }]\nlogging: { level: warn }\n",
                     "bench", *registry, overrides));
  auto store = std::make_shared<HashStore>();
  std::vector<std::shared_ptr<ProcessGroup>> groups(world);
  ranks.run([&](int r) { groups[r] = ProcessGroup::create({config, registry, store, r, world}); });
  return groups;
}

constexpr int kParams = 8;

void label(benchmark::State& state, int64_t firstCap = 0, bool asView = false) {
  state.SetBytesProcessed(state.iterations() * state.range(1));
  state.SetLabel(std::to_string(state.range(0)) + " ranks, " + std::to_string(state.range(1) >> 10) + " KiB" +
                 (firstCap ? ", first bucket cap " + std::to_string(firstCap >> 10) + " KiB" : "") +
                 (asView ? ", gradient as bucket view" : ""));
}

// The third argument splits the bytes into two allreduces as the Reducer's default buckets
// do (the first 1 MiB, then the rest): 1 waits for each in turn, 2 issues both and then
// waits (as the Reducer does).
void BM_PlainAllreduce(benchmark::State& state) {
  const int world = static_cast<int>(state.range(0));
  Ranks ranks(world);
  auto groups = glooGroups(ranks, world);
  const int64_t numel = state.range(1) / 4;
  const int64_t first = state.range(2) ? std::min<int64_t>(numel, (1 << 20) / 4) : numel;
  std::vector<std::vector<Tensor>> parts(world);
  for (auto& p : parts) {
    p.push_back(Tensor::empty({first}, DType::Float32));
    if (first < numel) p.push_back(Tensor::empty({numel - first}, DType::Float32));
  }
  for (auto _ : state)
    ranks.run([&](int r) {
      if (state.range(2) == 2) {  // both in flight at once, as the Reducer issues them
        std::vector<WorkPtr> works;
        for (auto& t : parts[r]) works.push_back(groups[r]->allreduce(t, {ReduceOp::Avg}));
        for (auto& w : works) w->wait();
      } else {
        for (auto& t : parts[r]) groups[r]->allreduce(t, {ReduceOp::Avg})->wait();
      }
    });
  label(state);
  state.counters["allreduces"] = static_cast<double>(parts[0].size());
}

void BM_Reducer(benchmark::State& state) {
  const int world = static_cast<int>(state.range(0));
  Ranks ranks(world);
  auto groups = glooGroups(ranks, world);
  const int64_t numel = state.range(1) / 4 / kParams;
  std::vector<ParamInfo> params(kParams, ParamInfo{Shape{numel}, DType::Float32});
  std::vector<std::unique_ptr<Reducer>> reducers(world);
  std::vector<std::vector<Tensor>> grads(world);
  ranks.run([&](int r) {
    ReducerOptions options;
    options.hook = std::make_shared<AverageHook>();
    options.firstBucketCapBytes = state.range(2);
    options.gradientAsBucketView = state.range(3) != 0;
    reducers[r] = std::make_unique<Reducer>(groups[r], params, options);
    for (int i = 0; i < kParams; ++i) grads[r].push_back(Tensor::empty({numel}, DType::Float32));
  });
  for (auto _ : state)
    ranks.run([&](int r) {
      reducers[r]->prepareForBackward();
      for (int i = kParams; i-- > 0;)
        reducers[r]->markReady(i, state.range(3) ? reducers[r]->bucketView(i) : grads[r][i]);
      reducers[r]->finalize();
    });
  label(state, state.range(2), state.range(3) != 0);
  state.counters["buckets"] = static_cast<double>(reducers[0]->stats().buckets.size());
  ranks.run([&](int r) { reducers[r].reset(); });
}

BENCHMARK(BM_PlainAllreduce)->ArgsProduct({{2, 4}, {4 << 20}, {0, 1, 2}})->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Reducer)
    ->ArgsProduct({{2, 4}, {4 << 20}, {1 << 20, 64 << 20}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
