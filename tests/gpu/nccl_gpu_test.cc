// SPDX-License-Identifier: Apache-2.0
// The nccl backend on real GPUs: every visible GPU is one rank (a thread each, over a
// HashStore), every op x dtype checked against the CPU reference (tests/plugins/
// reference_data.h), then the failure paths: a rank that skips an op (TimeoutError),
// abort() ending a wait, and the NaN check; then subgroups by newGroup and split, from
// ncclCommSplit of the parent's communicator or fresh. Exits 77 (skipped) without a
// usable device.
#include <cuda_runtime.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <optional>

#include <nlohmann/json.hpp>

#include "../host/test_util.h"
#include "../plugins/reference_data.h"
#include "commhost/sdk/comm_hook.h"

namespace commhost::test {
namespace {

int gpus() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

// A device copy of a CPU tensor on cuda:`device`, freed with its last view.
Tensor toDevice(const Tensor& cpu, int device) {
  cudaSetDevice(device);
  void* p = nullptr;
  if (cudaMalloc(&p, cpu.nbytes() ? cpu.nbytes() : 1) != cudaSuccess) throw std::runtime_error("cudaMalloc");
  cudaMemcpy(p, cpu.data(), cpu.nbytes(), cudaMemcpyHostToDevice);
  return Tensor::fromBlob(p, cpu.shape(), cpu.dtype(), Device::cuda(device),
                          std::shared_ptr<void>(p, [](void* q) { cudaFree(q); }));
}
Tensor zerosOn(Shape shape, DType dtype, int device) { return toDevice(Tensor::empty(shape, dtype), device); }
// Waits for the device (the op is ordered on the current stream by wait()), then copies back.
Tensor toHost(const Tensor& dev) {
  cudaSetDevice(dev.device().index);
  cudaDeviceSynchronize();
  Tensor cpu = Tensor::empty(dev.shape(), dev.dtype());
  cudaMemcpy(cpu.data(), dev.data(), dev.nbytes(), cudaMemcpyDeviceToHost);
  return cpu;
}

std::string config(const std::string& options, const char* timeout = "60s") {
  return std::string("store: hash\ngroup: { timeout: ") + timeout + " }\nbackends: { nccl: { options: {" + options +
         "} } }\nroutes: [{ device: cuda, backend: nccl }]\n";
}

class NcclGpu : public ::testing::TestWithParam<bool> {  // blocking_wait off / on
 protected:
  void SetUp() override {
    world = gpus();
    groups = makeGroups(config(GetParam() ? "blocking_wait: true" : ""), world);
  }
  void TearDown() override {
    for (auto& g : groups) g->shutdown();
  }
  void each(const std::function<void(ProcessGroup&, int)>& fn) {
    runRanks(world, [&](int r) {
      cudaSetDevice(r);
      fn(*groups[r], r);
    });
  }
  int world = 0;
  std::vector<std::shared_ptr<ProcessGroup>> groups;
};

void expectNear(const Tensor& got, int64_t i, double want, const std::string& what) {
  ASSERT_NEAR(load(got, i), want, tolerance(got.dtype()) * std::max(1.0, std::fabs(want))) << what << " i " << i;
}

TEST_P(NcclGpu, AllreduceAndReduceEveryDTypeAndOp) {
  constexpr int64_t n = 1031;
  each([&](ProcessGroup& pg, int rank) {
    for (int d = 0; d < kNumDTypes; ++d)
      for (int k = 0; k < ReduceOp::kNumKinds; ++k) {
        const auto dtype = static_cast<DType>(d);
        const auto kind = static_cast<ReduceOp::Kind>(k);
        if (!valid(dtype, kind) || ReduceOp(kind).isBitwise()) continue;
        const ReduceOp op = kind == ReduceOp::PreMulSum ? ReduceOp::preMulSum(0.5) : ReduceOp(kind);
        Tensor a = toDevice(sourceTensor(dtype, rank, n), rank);
        pg.allreduce(a, {op})->wait();
        Tensor r = toDevice(sourceTensor(dtype, rank, n), rank);
        pg.reduce(r, {world - 1, op})->wait();
        const Tensor ha = toHost(a), hr = toHost(r);
        const std::string what = std::string(dtypeName(dtype)) + " " + reduceOpName(kind);
        for (int64_t i = 0; i < n; ++i) {
          expectNear(ha, i, expected(dtype, kind, world, i), "allreduce " + what);
          if (rank == world - 1) expectNear(hr, i, expected(dtype, kind, world, i), "reduce " + what);
        }
      }
    std::vector<Tensor> many{toDevice(sourceTensor(DType::Float32, rank, 5), rank),
                             toDevice(sourceTensor(DType::Float32, rank, 9), rank)};
    pg.allreduceCoalesced(many)->wait();
    for (const auto& t : many) {
      const Tensor h = toHost(t);
      for (int64_t i = 0; i < h.numel(); ++i)
        expectNear(h, i, expected(DType::Float32, ReduceOp::Sum, world, i), "coalesced");
    }
    pg.barrier()->wait();
  });
}

TEST_P(NcclGpu, DataMovementEveryDType) {
  constexpr int64_t n = 257;
  each([&](ProcessGroup& pg, int rank) {
    for (int d = 0; d < kNumDTypes; ++d) {
      const auto dtype = static_cast<DType>(d);
      const std::string what = dtypeName(dtype);
      auto src = [&](int r) { return sourceTensor(dtype, r, n); };
      auto same = [&](const Tensor& dev, int fromRank, const std::string& op) {
        const Tensor h = toHost(dev), want = src(fromRank);
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(load(h, i), load(want, i)) << op << " " << what << " from " << fromRank;
      };
      // broadcast from the last rank
      Tensor b = toDevice(src(rank), rank);
      pg.broadcast(b, {world - 1})->wait();
      same(b, world - 1, "broadcast");
      // allgather (list and tensor)
      Tensor in = toDevice(src(rank), rank);
      std::vector<Tensor> outs;
      for (int r = 0; r < world; ++r) outs.push_back(zerosOn({n}, dtype, rank));
      pg.allgather(outs, in)->wait();
      for (int r = 0; r < world; ++r) same(outs[r], r, "allgather");
      Tensor flat = zerosOn({n * world}, dtype, rank);
      pg.allgatherIntoTensor(flat, in)->wait();
      for (int r = 0; r < world; ++r) same(flat.slice(r * n, n), r, "allgather_into_tensor");
      // gather and scatter at root 0
      std::vector<Tensor> g;
      if (rank == 0)
        for (int r = 0; r < world; ++r) g.push_back(zerosOn({n}, dtype, rank));
      pg.gather(g, in, {0})->wait();
      for (int r = 0; rank == 0 && r < world; ++r) same(g[r], r, "gather");
      std::vector<Tensor> sc;
      if (rank == 0)
        for (int r = 0; r < world; ++r) sc.push_back(toDevice(src(r), rank));
      Tensor got = zerosOn({n}, dtype, rank);
      pg.scatter(got, sc, {0})->wait();
      same(got, rank, "scatter");
      // alltoall: rank r sends src(r) to everyone, so receives src(peer) from each
      std::vector<Tensor> a2aIn, a2aOut;
      for (int r = 0; r < world; ++r) {
        a2aIn.push_back(toDevice(src(rank), rank));
        a2aOut.push_back(zerosOn({n}, dtype, rank));
      }
      pg.alltoall(a2aOut, a2aIn)->wait();
      for (int r = 0; r < world; ++r) same(a2aOut[r], r, "alltoall");
      Tensor singleIn = zerosOn({n * world}, dtype, rank), singleOut = zerosOn({n * world}, dtype, rank);
      for (int r = 0; r < world; ++r)
        cudaMemcpy(static_cast<char*>(singleIn.data()) + r * in.nbytes(), in.data(), in.nbytes(),
                   cudaMemcpyDeviceToDevice);
      pg.alltoallSingle(singleOut, singleIn)->wait();
      for (int r = 0; r < world; ++r) same(singleOut.slice(r * n, n), r, "alltoall_single");
      // send/recv in a ring
      if (world > 1) {
        Tensor recvd = zerosOn({n}, dtype, rank);
        const int next = (rank + 1) % world, prev = (rank + world - 1) % world;
        WorkPtr s, rv;
        if (rank % 2 == 0) {
          s = pg.send(in, next);
          rv = pg.recv(recvd, prev);
        } else {
          rv = pg.recv(recvd, prev);
          s = pg.send(in, next);
        }
        s->wait();
        rv->wait();
        same(recvd, prev, "send/recv");
      }
      // reduce_scatter (sum; bool sum is or)
      if (dtype != DType::Bool) {
        std::vector<Tensor> rsIn;
        for (int r = 0; r < world; ++r) rsIn.push_back(toDevice(src(rank), rank));
        Tensor rsOut = zerosOn({n}, dtype, rank);
        pg.reduceScatter(rsOut, rsIn, {ReduceOp::Sum})->wait();
        Tensor rstIn = zerosOn({n * world}, dtype, rank), rstOut = zerosOn({n}, dtype, rank);
        for (int r = 0; r < world; ++r)
          cudaMemcpy(static_cast<char*>(rstIn.data()) + r * in.nbytes(), in.data(), in.nbytes(),
                     cudaMemcpyDeviceToDevice);
        pg.reduceScatterTensor(rstOut, rstIn, {ReduceOp::Sum})->wait();
        const Tensor h1 = toHost(rsOut), h2 = toHost(rstOut);
        for (int64_t i = 0; i < n; ++i) {
          expectNear(h1, i, expected(dtype, ReduceOp::Sum, world, i), "reduce_scatter " + what);
          expectNear(h2, i, expected(dtype, ReduceOp::Sum, world, i), "reduce_scatter_tensor " + what);
        }
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(WaitModes, NcclGpu, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "BlockingWait" : "StreamWait"; });

TEST(NcclGpuFaults, ARankThatSkipsAnOpTimesOutTheOthers) {
  const int world = gpus();
  if (world < 2) GTEST_SKIP() << "needs 2 GPUs";
  auto groups = makeGroups(config("blocking_wait: true, init_timeout: 120s", "3s"), world);
  runRanks(world, [&](int rank) {
    cudaSetDevice(rank);
    Tensor warm = toDevice(sourceTensor(DType::Float32, rank, 8), rank);
    groups[rank]->allreduce(warm)->wait();  // every communicator exists
    if (rank == 0) return;                  // rank 0 skips the next allreduce
    Tensor t = toDevice(sourceTensor(DType::Float32, rank, 8), rank);
    EXPECT_THROW_WITH(groups[rank]->allreduce(t)->wait(), TimeoutError, "allreduce", "not completed within");
  });
  for (auto& g : groups) g->abort("test over");
}

TEST(NcclGpuFaults, AbortEndsABlockedWait) {
  const int world = gpus();
  if (world < 2) GTEST_SKIP() << "needs 2 GPUs";
  auto groups = makeGroups(config("blocking_wait: true", "120s"), world);
  runRanks(world, [&](int rank) {
    cudaSetDevice(rank);
    Tensor warm = toDevice(sourceTensor(DType::Float32, rank, 8), rank);
    groups[rank]->allreduce(warm)->wait();
    if (rank == 0) return;
    Tensor t = toDevice(sourceTensor(DType::Float32, rank, 8), rank);
    auto work = groups[rank]->allreduce(t);
    std::thread aborter([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      groups[rank]->abort("test aborts the stuck allreduce");
    });
    const auto started = std::chrono::steady_clock::now();
    EXPECT_THROW(work->wait(), Error);
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(30));
    aborter.join();
  });
  groups[0]->abort("test over");
}

TEST(NcclGpuFaults, NanCheckNamesTheTensor) {
  const int world = gpus();
  auto groups = makeGroups(config("nan_check: true"), world);
  runRanks(world, [&](int rank) {
    cudaSetDevice(rank);
    for (DType dtype : {DType::Float32, DType::Float16, DType::BFloat16, DType::Float64}) {
      Tensor cpu = sourceTensor(dtype, rank, 64);
      Tensor clean = toDevice(cpu, rank);
      groups[rank]->allreduce(clean)->wait();  // no NaN: runs
      storeValue(cpu, 3, std::numeric_limits<double>::quiet_NaN());
      Tensor bad = toDevice(cpu, rank);
      // Every rank holds a NaN, so every rank refuses before NCCL and none waits on another.
      EXPECT_THROW_WITH(groups[rank]->allreduce(bad), InvalidArgument, "holds NaN", "input tensor 0", "allreduce");
    }
  });
  for (auto& g : groups) g->shutdown();
}

// Groups whose ranks each use their own GPU: each thread sets its device before creating
// its group, so eager_init creates the communicator there.
std::vector<std::shared_ptr<ProcessGroup>> makeGpuGroups(const std::string& yaml, int world) {
  auto registry = testRegistry();
  auto config = configFrom(yaml, *registry);
  auto store = std::make_shared<HashStore>(std::chrono::seconds(60));
  std::vector<std::shared_ptr<ProcessGroup>> groups(world);
  runRanks(world, [&](int r) {
    cudaSetDevice(r);
    groups[r] = ProcessGroup::create({config, registry, store, r, world});
  });
  return groups;
}

// allreduce (sum) of sourceTensor(f32) over `pg`, whose members are the world ranks
// `members` (pg's rank order), checked against the members' sum.
void checkSubgroupAllreduce(ProcessGroup& pg, int worldRank, const std::vector<int>& members) {
  constexpr int64_t n = 513;
  Tensor t = toDevice(sourceTensor(DType::Float32, worldRank, n), worldRank);
  pg.allreduce(t)->wait();
  const Tensor h = toHost(t);
  for (int64_t i = 0; i < n; ++i) {
    double want = 0;
    for (int m : members) want += load(sourceTensor(DType::Float32, m, n), i);
    expectNear(h, i, want, pg.name() + " allreduce");
  }
}

// Subgroups of a parent that has its communicators (eager_init, or an op before): newGroup
// and split take theirs from ncclCommSplit of the parent's, on every parent rank (members
// or not), so the subgroup's store never sees a unique id. A parent without any gets
// fresh ones for its subgroups, through their own stores.
TEST(NcclGpuSubgroups, NewGroupAndSplitOfAParentWithCommunicators) {
  const int world = gpus();
  for (const char* how : {"eager_init: true", "", "none"}) {
    const bool parentHasComm = std::string(how) != "none";
    auto groups = makeGpuGroups(config(parentHasComm ? how : ""), world);
    // newGroup of the first world-1 ranks (the one rank on one GPU), split by parity.
    std::vector<int> all, firsts;
    for (int r = 0; r < world; ++r) all.push_back(r);
    for (int r = 0; r < std::max(1, world - 1); ++r) firsts.push_back(r);
    runRanks(world, [&](int rank) {
      cudaSetDevice(rank);
      ProcessGroup& pg = *groups[rank];
      // Without eager_init the parent's communicator comes from its first op.
      if (std::string(how).empty()) checkSubgroupAllreduce(pg, rank, all);
      auto sub = pg.newGroup(firsts);
      ASSERT_EQ(sub != nullptr, rank < static_cast<int>(firsts.size())) << how;
      std::vector<int> sameParity;
      for (int r = rank % 2; r < world; r += 2) sameParity.push_back(r);
      auto half = pg.split(rank % 2, rank);
      ASSERT_NE(half, nullptr);
      EXPECT_EQ(half->size(), static_cast<int>(sameParity.size()));
      for (auto* g : {sub.get(), half.get()}) {
        if (!g) continue;
        const std::vector<int>& members = g == sub.get() ? firsts : sameParity;
        checkSubgroupAllreduce(*g, rank, members);
        checkSubgroupAllreduce(*g, rank, members);  // and again, on the same communicator
        // A split communicator needs no unique-id exchange: this rank never joined one in
        // the subgroup's store.
        const std::string joined = "backend/nccl/nccl_join/0/" + std::to_string(g->rank());
        EXPECT_EQ(g->store()->check({joined}), !parentHasComm) << how << " " << g->name();
      }
      pg.barrier()->wait();  // the parent still works after the splits
      if (sub) sub->shutdown();
      half->shutdown();
    });
    for (auto& g : groups) g->shutdown();
  }
}

// enable_timing: a work's device time is known once its end event fired, and the flight
// recorder stores it (device_ms); without it there is none.
TEST(NcclGpuTiming, TimedWorksReportTheirDeviceTimeToTheFlightRecorder) {
  const int world = gpus();
  for (bool timed : {true, false}) {
    auto groups = makeGroups(config(timed ? "enable_timing: true" : ""), world);
    std::vector<WorkPtr> works(world);
    runRanks(world, [&](int rank) {
      cudaSetDevice(rank);
      Tensor t = toDevice(sourceTensor(DType::Float32, rank, 16 << 20), rank);  // 64 MiB
      works[rank] = groups[rank]->allreduce(t);
      works[rank]->wait();
      cudaDeviceSynchronize();  // the op ended: its events fired
    });
    for (int rank = 0; rank < world; ++rank) {
      const std::optional<double> ms = works[rank]->deviceMs();
      if (timed) {
        ASSERT_TRUE(ms.has_value()) << "rank " << rank;
        EXPECT_GT(*ms, 0.0);
        EXPECT_LT(*ms, 60000.0);
      } else {
        EXPECT_FALSE(ms.has_value()) << "rank " << rank << ": untimed events";
      }
    }
    // The supervisor's watchdog records the end (and the time) when it sees the op done.
    nlohmann::json entry;
    for (int i = 0; i < 100; ++i) {
      std::ifstream in(dumpFlightRecorder("test"));
      const auto dump = nlohmann::json::parse(in);
      for (const auto& e : dump["entries"])
        if (e["op"] == "allreduce") entry = e;
      if (entry.value("state", "") == "completed") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_EQ(entry.value("state", ""), "completed") << entry.dump();
    EXPECT_EQ(entry.contains("device_ms"), timed) << entry.dump();
    if (timed) {
      EXPECT_GT(entry["device_ms"].get<double>(), 0.0);
    }
    for (auto& g : groups) g->shutdown();
  }
}

// The fp16/bf16 compression hooks on CUDA buckets: cast on the device (the cast kernels),
// averaged by nccl (premul_sum), cast back into the bucket.
TEST(NcclGpuHooks, SixteenBitCompressionOfCudaBuckets) {
  const int world = gpus();
  constexpr int64_t n = 10007;
  for (const char* plugin : {"fp16_compress", "bf16_compress"}) {
    const double tolerance = std::string(plugin) == "fp16_compress" ? 4e-3 : 3e-2;
    auto groups = makeGroups(config("") + "hooks: { gradient: { plugin: " + plugin + " } }\n", world);
    runRanks(world, [&](int rank) {
      cudaSetDevice(rank);
      auto hook = makeCommHook(*groups[rank]);
      Tensor cpu = Tensor::empty({n}, DType::Float32);
      for (int64_t k = 0; k < n; ++k) cpu.data_as<float>()[k] = static_cast<float>(rank + 1 + k % 5);
      GradBucket bucket;
      bucket.group = groups[rank].get();
      bucket.buffer = toDevice(cpu, rank);
      bucket.gradients = {bucket.buffer};
      bucket.offsets = {0};
      bucket.params = {0};
      const auto out = hook->runHook(bucket)->wait(std::chrono::seconds(60));
      ASSERT_EQ(out.size(), 1u);
      EXPECT_EQ(out[0].data(), bucket.buffer.data()) << "the result is the bucket's own buffer";
      const Tensor h = toHost(bucket.buffer);
      for (int64_t k = 0; k < n; ++k) {
        const double want = (world + 1) / 2.0 + k % 5;
        ASSERT_NEAR(h.data_as<float>()[k], want, tolerance * want) << plugin << " rank " << rank << " k " << k;
      }
    });
    for (auto& g : groups) g->shutdown();
  }
}

}  // namespace
}  // namespace commhost::test

int main(int argc, char** argv) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    std::printf("skipped: no usable CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "none found");
    return 77;
  }
  std::printf("running on %d GPU(s) as %d ranks\n", n, n);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
