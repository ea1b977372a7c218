// SPDX-License-Identifier: Apache-2.0
// Host dispatch overhead: one allreduce through ProcessGroup -> RouteTable -> self
// backend -> Work, at world size 1 (the self backend does no communication; at 1 MiB
// with Sum it does no work on the data either, so this is the host's own cost), with the
// supervisor (watchdog, flight recorder, heartbeat) on and off: the difference is its cost.
// Also the same with a shadow route whose sample rate picks no call (shadow mode's cost
// when unsampled: one hash of the seq per call), the supervisor with its flight recorder
// off (entries 0: no per-op record, no clock read), and ProcessGroup::syncPoint() when
// nothing was published, with the config poller off and polling the store every millisecond.
// And a route of two backends ordered by the `measured` tuner (the second from 64 KiB on):
// the tuner runs only when the table is built, so a call should cost what it did; how long
// building the table takes with and without the tuner (BM_RouteTableBuild). And 8 B on
// the shm backend at world size 1 (BM_ShmDispatch): its whole per-op path with the
// host's, which is what an 8 B op between two ranks spends besides waiting for the peer.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <fstream>

#include "commhost/commhost.h"
#include "commhost/dispatcher.h"
#include "commhost/fast_clock.h"
#include "commhost/sdk/measured_table.h"

namespace {

// Two self backends in one route and the `measured` tuner over a table (world size 1) in
// which the second wins allreduce from 64 KiB on.
std::string tunedRoutes() {
  using namespace commhost;
  static const std::string path = "/tmp/commhost-bench-table-" + std::to_string(::getpid()) + ".json";
  MeasuredTable t;
  MeasuredTable::Op op;
  op.op = OpType::Allreduce;
  op.rows.push_back({8, {{"self", 1, true}, {"ref", 2, true}}});
  op.rows.push_back({65536, {{"self", 20, true}, {"ref", 10, true}}});
  t.ops.push_back(op);
  std::ofstream(path) << t.toJson();
  return "backends: { self: {}, ref: { plugin: self } }\nroutes: [{ device: cpu, backend: [self, ref] }]\n"
         "tuner: { plugin: measured, options: { table: " +
         path + " } }\n";
}

// `set`: more "key=value" overrides.
std::shared_ptr<commhost::ProcessGroup> selfGroup(bool supervised = true, const std::string& more = "",
                                                  bool shadow = false, std::vector<std::string> set = {},
                                                  bool tuned = false) {
  using namespace commhost;
  auto registry = std::make_shared<PluginRegistry>();
  ConfigOverrides overrides;
  overrides.fromEnvironment = false;
  overrides.set = std::move(set);
  // `more` that starts with its own backends and routes replaces the self route.
  std::string routes = "backends: { self: {} }\nroutes: [{ device: cpu, backend: self }]\n";
  if (more.rfind("backends:", 0) == 0) routes.clear();
  else if (tuned) routes = tunedRoutes();
  else if (shadow)
    routes =
        "backends: { self: {}, ref: { plugin: self } }\n"
        "routes: [{ device: cpu, backend: self, shadow: ref, sample: 1e-12 }]\n";
  auto config = std::make_shared<Config>(loadConfigText(
      routes + "logging: { level: warn }\nsupervisor: { enabled: " + (supervised ? "true" : "false") + " }\n" + more,
      "bench", *registry, overrides));
  return ProcessGroup::create({config, registry, std::make_shared<HashStore>(), 0, 1});
}

void BM_AllreduceDispatch(benchmark::State& state) {
  // range(3): 1 the flight recorder off, 2 every op timed (by default a sample of the small ones)
  const bool recorderOff = state.range(3) == 1, timeAll = state.range(3) == 2;
  auto pg = selfGroup(state.range(1) != 0, "", state.range(2) != 0,
                      recorderOff ? std::vector<std::string>{"supervisor.flight_recorder.entries=0"}
                      : timeAll   ? std::vector<std::string>{"supervisor.flight_recorder.time_every=1"}
                                  : std::vector<std::string>{},
                      state.range(4) != 0);
  commhost::Tensor t = commhost::Tensor::empty({state.range(0) / 4}, commhost::DType::Float32);
  for (auto _ : state) {
    auto work = pg->allreduce(t);
    work->wait();
    benchmark::DoNotOptimize(work);
  }
  state.SetLabel(std::to_string(state.range(0)) + " B, supervisor " + (state.range(1) ? "on" : "off") +
                 (state.range(2) ? ", unsampled shadow route" : "") + (recorderOff ? ", flight recorder off" : "") +
                 (timeAll ? ", every op timed" : "") + (state.range(4) ? ", route ordered by the measured tuner" : ""));
}
BENCHMARK(BM_AllreduceDispatch)->ArgsProduct({{8, 1 << 20}, {0, 1}, {0}, {0}, {0, 1}});
BENCHMARK(BM_AllreduceDispatch)->Args({8, 1, 1, 0, 0});
BENCHMARK(BM_AllreduceDispatch)->Args({8, 1, 0, 1, 0});
BENCHMARK(BM_AllreduceDispatch)->Args({8, 1, 0, 2, 0});

// The shm backend at world size 1: its whole per-op path (the op runs inline, one step
// of the line protocol, no peer to wait for) with the host's, the part of an 8 B op
// between two ranks that is not waiting for the peer's cache line.
void BM_ShmDispatch(benchmark::State& state) {
  auto pg = selfGroup(
      state.range(0) != 0,
      "backends: { shm: { plugin: shm }, self: {} }\nroutes: [{ device: cpu, backend: [shm, self] }]\n");
  commhost::Tensor t = commhost::Tensor::empty({2}, commhost::DType::Float32);
  for (auto _ : state) {
    auto work = pg->allreduce(t);
    work->wait();
    benchmark::DoNotOptimize(work);
  }
  state.SetLabel(std::string("8 B on shm, world size 1, supervisor ") + (state.range(0) ? "on" : "off"));
}
BENCHMARK(BM_ShmDispatch)->Arg(0)->Arg(1);

// What a group pays once per table (creation, each hot swap, each subgroup): the table of
// the tuned config built with its tuner (forGroup: created, asked per size class, destroyed)
// against without (forConfig).
void BM_RouteTableBuild(benchmark::State& state) {
  using namespace commhost;
  PluginRegistry registry;
  ConfigOverrides overrides;
  overrides.fromEnvironment = false;
  const Config config = loadConfigText(tunedRoutes() + "logging: { level: warn }\n", "bench", registry, overrides);
  const bool tuned = state.range(0) != 0;
  for (auto _ : state) {
    RouteTable t = tuned ? RouteTable::forGroup(config, registry, {"main", 0, 1, 1})
                         : RouteTable::forConfig(config, registry);
    benchmark::DoNotOptimize(t);
  }
  state.SetLabel(tuned ? "with the measured tuner" : "the config's order");
}
BENCHMARK(BM_RouteTableBuild)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_RouteLookup(benchmark::State& state) {
  auto pg = selfGroup();
  int64_t bytes = 8;
  for (auto _ : state) {
    benchmark::DoNotOptimize(pg->routes().route(commhost::OpType::Allreduce, commhost::DeviceType::CPU, bytes,
                                                commhost::DType::Float32, commhost::ReduceOp::Sum));
    bytes ^= 1;
  }
}
BENCHMARK(BM_RouteLookup);

void BM_SyncPointNothingPublished(benchmark::State& state) {
  auto pg = selfGroup(true, state.range(0) ? "group: { sync_poll: 1ms }\n" : "");
  for (auto _ : state) pg->syncPoint();
  benchmark::DoNotOptimize(pg->syncStatus().count);
  state.SetLabel(state.range(0) ? "poller reading the store every 1 ms" : "group.sync_poll 0s (no poller)");
}
BENCHMARK(BM_SyncPointNothingPublished)->Arg(0)->Arg(1);

// The clock the supervisor reads twice per op, and the one it replaced.
void BM_FastClockNow(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(commhost::FastClock::now());
  state.SetLabel(commhost::FastClock::countsCycles() ? "time-stamp counter" : "steady_clock (no usable counter)");
}
BENCHMARK(BM_FastClockNow);

void BM_SteadyClockNow(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(std::chrono::steady_clock::now());
}
BENCHMARK(BM_SteadyClockNow);

}  // namespace

BENCHMARK_MAIN();
