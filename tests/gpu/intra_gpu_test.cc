// SPDX-License-Identifier: Apache-2.0
// The intra-node one-shot / two-shot allreduce on real GPUs (part of
// commhost_nccl_gpu_tests; main() is in nccl_gpu_test.cc):
//   IntraKernel  2 to 4 "ranks" on ONE device, each with its own region, stream and host
//                words, launched through launchIntraAllreduce, so a one-GPU machine runs
//                the kernels too: results bit-equal to the CPU reference (which folds in
//                the same order), one- and two-shot calls mixed so slots are reused by
//                calls of other shapes, misaligned data, mismatched counts failing with the
//                data untouched, a launch after a failure doing nothing, and the abort word
//                and the timeout ending a wait for a peer that never launches;
//   IntraComm    (2+ GPUs) the real setup on every visible GPU (ranks as threads over a
//                HashStore): results against ncclAllReduce on the same inputs around the
//                thresholds, mismatched sizes failing every rank, abort() unblocking ranks
//                whose peer never launches;
//   IntraGroup   (2+ GPUs) allreduce through ProcessGroup with intra_node on and off.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cmath>
#include <cstring>
#include <new>
#include <thread>

#include "../host/test_util.h"
#include "commhost/kernels/intra_allreduce.h"
#include "commhost/kernels/reduce.h"
#include "intra_comm.h"

namespace commhost::test {
namespace {

using kernels::IntraAlgo;
using nccl_backend::IntraComm;
using Clock = std::chrono::steady_clock;

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

int deviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

// Deterministic inputs. exact: multiples of 0.25 in [-2, 2], whose sums over 8 ranks stay
// exact in every dtype (so any summation order, NCCL's included, gives the same bits).
std::vector<uint8_t> input(DType dtype, int rank, size_t count, bool exact, int salt = 0) {
  std::vector<uint8_t> out(count * elementSize(dtype) + 1);
  for (size_t i = 0; i < count; ++i) {
    const uint32_t h = static_cast<uint32_t>((i + 1) * 2654435761u ^ (rank + 7) * 40503u ^ salt * 9176u);
    const double v = exact ? static_cast<double>(static_cast<int>(h % 17) - 8) * 0.25
                           : static_cast<double>(static_cast<int>(h % 2001) - 1000) / 997.0;
    kernels::setElement(out.data(), dtype, static_cast<int64_t>(i), v);
  }
  out.resize(count * elementSize(dtype));
  return out;
}

std::vector<uint8_t> reference(const std::vector<std::vector<uint8_t>>& ins, DType dtype, size_t count,
                               const ReduceOp& op) {
  const int world = static_cast<int>(ins.size());
  std::vector<uint8_t> out(count * elementSize(dtype));
  std::vector<const void*> srcs;
  for (const auto& in : ins) srcs.push_back(in.data());
  if (count)
    kernels::reduceSourcesBuffer(out.data(), srcs.data(), world, count, dtype, op.kind, kernels::finalScale(op, world));
  return out;
}

// ---------------------------------------------------------------------------------------
// IntraKernel: ranks on one device.

struct HostWords {  // as IntraComm keeps them
  kernels::IntraError error;
  uint32_t abort = 0;
};

class OneDevice {
 public:
  explicit OneDevice(int world) : world_(world) {
    cudaSetDevice(0);
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    // Every rank's blocks must be resident at once on the one device.
    config_ = kernels::chooseIntraConfig(sms / world / 2, kernels::IntraLimits{}.bufferBytes);
    layout_ = kernels::intraLayout(config_);
    for (int r = 0; r < world; ++r) {
      void* p = nullptr;
      cudaMalloc(&p, layout_.bytes);
      regions_[r] = static_cast<uint8_t*>(p);
      cudaMemset(regions_[r] + layout_.posted, 0, layout_.flagBytes);
      void* w = nullptr;
      cudaHostAlloc(&w, sizeof(HostWords), cudaHostAllocMapped);
      words_[r] = new (w) HostWords();
      cudaStreamCreateWithFlags(&streams_[r], cudaStreamNonBlocking);
      void* d = nullptr;
      cudaMalloc(&d, kernels::IntraLimits{}.bufferBytes + 64);
      data_[r] = static_cast<uint8_t*>(d);
    }
    cudaDeviceSynchronize();
  }
  ~OneDevice() {
    cudaSetDevice(0);
    for (int r = 0; r < world_; ++r) __atomic_store_n(&words_[r]->abort, 1u, __ATOMIC_RELEASE);
    cudaDeviceSynchronize();
    for (int r = 0; r < world_; ++r) {
      cudaStreamDestroy(streams_[r]);
      cudaFree(regions_[r]);
      cudaFree(data_[r]);
      cudaFreeHost(words_[r]);
    }
  }

  // Copies `in` to rank r's data (at byte `offset`) and queues its kernel; the step base
  // advances as IntraComm's does.
  int launch(int r, const std::vector<uint8_t>& in, size_t count, DType dtype, const ReduceOp& op, IntraAlgo algo,
             uint64_t timeoutNs = 0, size_t offset = 0) {
    cudaMemcpyAsync(data_[r] + offset, in.data(), in.size(), cudaMemcpyHostToDevice, streams_[r]);
    kernels::IntraLaunch a;
    a.data = data_[r] + offset;
    a.count = count;
    a.dtype = dtype;
    a.op = op.kind;
    a.factor = static_cast<float>(kernels::finalScale(op, world_));
    a.algo = algo;
    a.rank = r;
    a.world = world_;
    for (int p = 0; p < world_; ++p) a.regions[p] = regions_[p];
    a.config = config_;
    a.layout = layout_;
    a.stepBase = steps_[r].take(algo);
    a.signature = kernels::intraSignature(count, dtype, op.kind, algo);
    a.timeoutNs = timeoutNs;
    a.abortWord = &words_[r]->abort;
    a.error = &words_[r]->error;
    return kernels::launchIntraAllreduce(a, streams_[r]);
  }
  std::vector<uint8_t> result(int r, size_t bytes, size_t offset = 0) {
    std::vector<uint8_t> out(bytes);
    cudaStreamSynchronize(streams_[r]);
    cudaMemcpy(out.data(), data_[r] + offset, bytes, cudaMemcpyDeviceToHost);
    return out;
  }
  uint32_t code(int r) const { return __atomic_load_n(&words_[r]->error.code, __ATOMIC_ACQUIRE); }
  const kernels::IntraError& error(int r) const { return words_[r]->error; }
  void setAbort(int r) { __atomic_store_n(&words_[r]->abort, 1u, __ATOMIC_RELEASE); }
  cudaStream_t stream(int r) const { return streams_[r]; }
  int world() const { return world_; }

 private:
  int world_;
  kernels::IntraConfig config_;
  kernels::IntraLayout layout_;
  uint8_t* regions_[kernels::kIntraMaxRanks] = {};
  uint8_t* data_[kernels::kIntraMaxRanks] = {};
  HostWords* words_[kernels::kIntraMaxRanks] = {};
  cudaStream_t streams_[kernels::kIntraMaxRanks] = {};
  kernels::IntraSteps steps_[kernels::kIntraMaxRanks];
};

// Byte sizes around the thresholds (one-shot up to 256 KiB, two-shot up to 10 MiB).
const std::vector<size_t> kSizes{0, 16, 1040, 256 << 10, (256 << 10) + 16, (1 << 20) + 48, 10 << 20};

TEST(IntraKernel, MatchesTheCpuReferenceBitForBitAroundTheThresholds) {
  for (int world : {2, 3, 4}) {
    OneDevice dev(world);
    for (DType dtype : {DType::Float32, DType::Float16, DType::BFloat16})
      for (const ReduceOp& op : {ReduceOp(ReduceOp::Sum), ReduceOp(ReduceOp::Avg), ReduceOp::preMulSum(0.5)})
        for (size_t bytes : kSizes) {
          const size_t count = bytes / elementSize(dtype);
          const IntraAlgo algo = kernels::selectAllreduce(kernels::NvlTopology::FullyConnected, world, bytes, dtype,
                                                          op.kind);
          ASSERT_TRUE(algo == IntraAlgo::OneShot || algo == IntraAlgo::TwoShot) << bytes;
          std::vector<std::vector<uint8_t>> ins;
          for (int r = 0; r < world; ++r) ins.push_back(input(dtype, r, count, false, static_cast<int>(bytes)));
          for (int r = 0; r < world; ++r)
            ASSERT_EQ(dev.launch(r, ins[r], count, dtype, op, algo, 30'000'000'000ull), 0);
          const std::vector<uint8_t> want = reference(ins, dtype, count, op);
          const std::string what = "world " + std::to_string(world) + " " + dtypeName(dtype) + " " +
                                   reduceOpName(op.kind) + " " + std::to_string(bytes) + " bytes (" +
                                   kernels::intraAlgoName(algo) + ")";
          for (int r = 0; r < world; ++r) {
            const std::vector<uint8_t> got = dev.result(r, want.size());
            ASSERT_EQ(dev.code(r), kernels::kIntraOk) << what << ": " << kernels::describeIntraError(dev.error(r));
            ASSERT_TRUE(got == want) << what << " rank " << r;
          }
        }
  }
}

TEST(IntraKernel, MisalignedDataTakesTheScalarPathWithTheSameBits) {
  OneDevice dev(2);
  for (size_t bytes : {size_t{4096}, size_t{1} << 20}) {  // one-shot, two-shot
    const size_t count = bytes / 4;
    const IntraAlgo algo = kernels::selectAllreduce(kernels::NvlTopology::FullyConnected, 2, bytes, DType::Float32,
                                                    ReduceOp::Sum);
    std::vector<std::vector<uint8_t>> ins{input(DType::Float32, 0, count, false),
                                          input(DType::Float32, 1, count, false)};
    for (int r = 0; r < 2; ++r) ASSERT_EQ(dev.launch(r, ins[r], count, DType::Float32, ReduceOp::Sum, algo, 0, 4), 0);
    const auto want = reference(ins, DType::Float32, count, ReduceOp::Sum);
    for (int r = 0; r < 2; ++r) {
      EXPECT_TRUE(dev.result(r, want.size(), 4) == want) << bytes << " rank " << r;
      EXPECT_EQ(dev.code(r), kernels::kIntraOk);
    }
  }
}

TEST(IntraKernel, MismatchedCountsFailEveryRankAndLeaveTheDataAlone) {
  OneDevice dev(2);
  const auto in0 = input(DType::Float32, 0, 1024, false), in1 = input(DType::Float32, 1, 512, false);
  ASSERT_EQ(dev.launch(0, in0, 1024, DType::Float32, ReduceOp::Sum, IntraAlgo::OneShot, 10'000'000'000ull), 0);
  ASSERT_EQ(dev.launch(1, in1, 512, DType::Float32, ReduceOp::Sum, IntraAlgo::OneShot, 10'000'000'000ull), 0);
  EXPECT_TRUE(dev.result(0, in0.size()) == in0);
  EXPECT_TRUE(dev.result(1, in1.size()) == in1);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(dev.code(r), kernels::kIntraMismatch) << kernels::describeIntraError(dev.error(r));
    EXPECT_EQ(dev.error(r).peer, 1 - r);
    EXPECT_EQ(dev.error(r).stepBase, 0u);
  }
  EXPECT_NE(kernels::describeIntraError(dev.error(0)).find("this rank has 1024 x f32 sum (one-shot), rank 1 has 512"),
            std::string::npos);
  // The next launch does nothing: data untouched, the first failure still on record.
  const auto again = input(DType::Float32, 0, 1024, false, 5);
  ASSERT_EQ(dev.launch(0, again, 1024, DType::Float32, ReduceOp::Sum, IntraAlgo::OneShot, 1'000'000'000ull), 0);
  EXPECT_TRUE(dev.result(0, again.size()) == again);
  EXPECT_EQ(dev.error(0).stepBase, 0u);
}

TEST(IntraKernel, OneShotAgainstTwoShotIsAMismatchToo) {
  OneDevice dev(2);
  const size_t small = (256 << 10) / 4, large = small + 4;
  const auto in0 = input(DType::Float32, 0, small, false), in1 = input(DType::Float32, 1, large, false);
  ASSERT_EQ(dev.launch(0, in0, small, DType::Float32, ReduceOp::Sum, IntraAlgo::OneShot, 10'000'000'000ull), 0);
  ASSERT_EQ(dev.launch(1, in1, large, DType::Float32, ReduceOp::Sum, IntraAlgo::TwoShot, 10'000'000'000ull), 0);
  EXPECT_TRUE(dev.result(0, in0.size()) == in0);
  EXPECT_TRUE(dev.result(1, in1.size()) == in1);
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(dev.code(r), kernels::kIntraMismatch) << kernels::describeIntraError(dev.error(r));
}

TEST(IntraKernel, TheAbortWordEndsAWaitForAPeerThatNeverLaunches) {
  OneDevice dev(2);
  const auto in = input(DType::BFloat16, 1, 4096, false);
  ASSERT_EQ(dev.launch(1, in, 4096, DType::BFloat16, ReduceOp::Sum, IntraAlgo::OneShot, 0), 0);  // no timeout
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(cudaStreamQuery(dev.stream(1)), cudaErrorNotReady) << "rank 1 should still wait for rank 0";
  const auto started = Clock::now();
  dev.setAbort(1);
  EXPECT_TRUE(dev.result(1, in.size()) == in);
  EXPECT_LT(Clock::now() - started, std::chrono::seconds(5));
  ASSERT_EQ(dev.code(1), kernels::kIntraAborted);
  EXPECT_EQ(dev.error(1).peer, 0);
  EXPECT_EQ(dev.error(1).wait, kernels::kIntraWaitPosted);
}

TEST(IntraKernel, TheTimeoutEndsAWaitForAPeerThatNeverLaunches) {
  OneDevice dev(2);
  const auto in = input(DType::Float16, 0, 1 << 19, false);  // two-shot
  const auto started = Clock::now();
  ASSERT_EQ(dev.launch(0, in, 1 << 19, DType::Float16, ReduceOp::Sum, IntraAlgo::TwoShot, 200'000'000ull), 0);
  EXPECT_TRUE(dev.result(0, in.size()) == in);
  EXPECT_LT(Clock::now() - started, std::chrono::seconds(10));
  ASSERT_EQ(dev.code(0), kernels::kIntraTimeout);
  EXPECT_EQ(dev.error(0).peer, 1);
}

// ---------------------------------------------------------------------------------------
// IntraComm: the real setup, every visible GPU a rank.

class IntraCommGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    world = deviceCount();
    if (world < 2) GTEST_SKIP() << "needs 2 GPUs";
    world = std::min(world, kernels::kIntraMaxRanks);
    store = std::make_shared<HashStore>(std::chrono::seconds(60));
    ctx.resize(world);
    comms.resize(world);
    streams.resize(world);
    std::vector<std::string> why(world);
    runRanks(world, [&](int r) {
      cudaSetDevice(r);
      ctx[r].groupName = "intra-gpu";
      ctx[r].rank = r;
      ctx[r].worldSize = world;
      ctx[r].timeout = std::chrono::seconds(60);
      ctx[r].store = store;
      comms[r] = IntraComm::create({&ctx[r], r, "nccl_intra/0", {}}, &why[r]);
      cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking);
    });
    for (int r = 1; r < world; ++r) ASSERT_EQ(comms[r] == nullptr, comms[0] == nullptr) << "ranks disagree";
    if (!comms[0]) GTEST_SKIP() << "intra_node is not usable on these GPUs: " << why[0];
  }
  void TearDown() override {
    runRanks(static_cast<int>(comms.size()), [&](int r) {
      cudaSetDevice(r);
      if (comms[r]) comms[r]->close(streams[r], clean);
      comms[r].reset();
      if (streams[r]) cudaStreamDestroy(streams[r]);
    });
  }
  OpContext opFor(int r, uint64_t seq) const {
    OpContext op;
    op.group = "intra-gpu";
    op.rank = r;
    op.seq = seq;
    op.timeout = std::chrono::seconds(60);
    return op;
  }
  void* deviceCopy(int r, const std::vector<uint8_t>& bytes) {
    void* p = nullptr;
    cudaSetDevice(r);
    cudaMalloc(&p, bytes.size() + 16);
    cudaMemcpy(p, bytes.data(), bytes.size(), cudaMemcpyHostToDevice);
    return p;
  }
  std::vector<uint8_t> hostCopy(const void* p, size_t bytes) {
    std::vector<uint8_t> out(bytes);
    cudaMemcpy(out.data(), p, bytes, cudaMemcpyDeviceToHost);
    return out;
  }

  int world = 0;
  bool clean = true;
  std::shared_ptr<HashStore> store;
  std::vector<BackendContext> ctx;
  std::vector<std::shared_ptr<IntraComm>> comms;
  std::vector<cudaStream_t> streams;
};

ncclDataType_t ncclType(DType d) {
  return d == DType::Float32 ? ncclFloat32 : d == DType::Float16 ? ncclFloat16 : ncclBfloat16;
}

TEST_F(IntraCommGpu, OneShotAndTwoShotMatchNcclAllReduceOnTheSameInputs) {
  std::vector<ncclComm_t> nccl(world);
  ASSERT_EQ(ncclCommInitAll(nccl.data(), world, nullptr), ncclSuccess);
  runRanks(world, [&](int r) {
    cudaSetDevice(r);
    uint64_t seq = 0;
    for (DType dtype : {DType::Float32, DType::Float16, DType::BFloat16})
      for (ReduceOp::Kind kind : {ReduceOp::Sum, ReduceOp::Avg})
        for (size_t bytes : kSizes) {
          if (bytes == 0) continue;
          const size_t count = bytes / elementSize(dtype);
          const IntraAlgo algo = comms[r]->select(bytes, dtype, kind);
          ASSERT_EQ(algo, bytes <= (256u << 10) ? IntraAlgo::OneShot : IntraAlgo::TwoShot) << bytes;
          const auto in = input(dtype, r, count, true, static_cast<int>(seq));
          void* mine = deviceCopy(r, in);
          void* theirs = deviceCopy(r, in);
          uint64_t base = 0;
          ASSERT_EQ(
              comms[r]->launch(mine, count, dtype, ReduceOp(kind), algo, std::chrono::seconds(60), streams[r], &base),
              0);
          ASSERT_EQ(ncclAllReduce(theirs, theirs, count, ncclType(dtype), kind == ReduceOp::Sum ? ncclSum : ncclAvg,
                                  nccl[r], streams[r]),
                    ncclSuccess);
          CUDA_OK(cudaStreamSynchronize(streams[r]));
          comms[r]->verify(opFor(r, ++seq), base);
          const auto got = hostCopy(mine, in.size()), want = hostCopy(theirs, in.size());
          const std::string what = std::string(dtypeName(dtype)) + " " + reduceOpName(kind) + " " +
                                   std::to_string(bytes) + " bytes (" + kernels::intraAlgoName(algo) + ")";
          if (kind == ReduceOp::Sum) {
            EXPECT_TRUE(got == want) << what << " rank " << r;  // exact data: any order gives these bits
          } else {
            const double tol = dtype == DType::Float32 ? 1e-6 : dtype == DType::Float16 ? 2e-3 : 1e-2;
            for (size_t i = 0; i < count; ++i) {
              const double g = kernels::getElement(got.data(), dtype, static_cast<int64_t>(i));
              const double w = kernels::getElement(want.data(), dtype, static_cast<int64_t>(i));
              ASSERT_NEAR(g, w, tol * std::max(1.0, std::fabs(w))) << what << " rank " << r << " i " << i;
            }
          }
          cudaFree(mine);
          cudaFree(theirs);
        }
  });
  for (auto c : nccl) ncclCommDestroy(c);
}

TEST_F(IntraCommGpu, MismatchedSizesFailEveryRankWithoutAWrongResult) {
  runRanks(world, [&](int r) {
    cudaSetDevice(r);
    const size_t count = r == 0 ? 2048 : 1024;  // rank 0 disagrees
    const auto in = input(DType::Float32, r, count, false);
    void* data = deviceCopy(r, in);
    uint64_t base = 0;
    ASSERT_EQ(comms[r]->launch(data, count, DType::Float32, ReduceOp(ReduceOp::Sum), IntraAlgo::OneShot,
                               std::chrono::seconds(60), streams[r], &base),
              0);
    CUDA_OK(cudaStreamSynchronize(streams[r]));
    EXPECT_THROW_WITH(comms[r]->verify(opFor(r, 1), base), InvalidArgument, "[group intra-gpu rank", "allreduce seq 1",
                      "ranks disagree", "2048 x f32", "1024 x f32");
    EXPECT_TRUE(hostCopy(data, in.size()) == in) << "rank " << r << "'s data changed";
    EXPECT_THROW_WITH(comms[r]->checkUsable(opFor(r, 2)), BackendError, "no longer agree", "abort the group");
    cudaFree(data);
  });
  clean = false;
}

TEST_F(IntraCommGpu, AbortUnblocksRanksWhosePeerNeverLaunches) {
  runRanks(world, [&](int r) {
    cudaSetDevice(r);
    if (r == 0) return;  // never launches
    const auto in = input(DType::BFloat16, r, 4096, false);
    void* data = deviceCopy(r, in);
    uint64_t base = 0;
    ASSERT_EQ(comms[r]->launch(data, 4096, DType::BFloat16, ReduceOp(ReduceOp::Sum), IntraAlgo::OneShot,
                               std::chrono::seconds(120), streams[r], &base),
              0);
    std::thread aborter([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      comms[r]->abort();
    });
    const auto started = Clock::now();
    CUDA_OK(cudaStreamSynchronize(streams[r]));
    EXPECT_LT(Clock::now() - started, std::chrono::seconds(10));
    aborter.join();
    EXPECT_THROW_WITH(comms[r]->verify(opFor(r, 1), base), AbortedError, "aborted while waiting for peer 0");
    EXPECT_TRUE(hostCopy(data, in.size()) == in);
    cudaFree(data);
  });
  clean = false;
}

// ---------------------------------------------------------------------------------------
// IntraGroup: through ProcessGroup and the nccl plugin.

std::string intraConfig(bool intra) {
  return std::string("store: hash\ngroup: { timeout: 60s }\nbackends: { nccl: { options: { blocking_wait: true") +
         (intra ? ", intra_node: true" : "") + " } } }\nroutes: [{ device: cuda, backend: nccl }]\n";
}

Tensor onDevice(const std::vector<uint8_t>& bytes, DType dtype, int device) {
  cudaSetDevice(device);
  void* p = nullptr;
  cudaMalloc(&p, bytes.size() + 16);
  cudaMemcpy(p, bytes.data(), bytes.size(), cudaMemcpyHostToDevice);
  return Tensor::fromBlob(p, {static_cast<int64_t>(bytes.size() / elementSize(dtype))}, dtype, Device::cuda(device),
                          std::shared_ptr<void>(p, [](void* q) { cudaFree(q); }));
}

TEST(IntraGroup, AllreduceWithIntraNodeEqualsNccl) {
  const int world = std::min(deviceCount(), kernels::kIntraMaxRanks);
  if (world < 2) GTEST_SKIP() << "needs 2 GPUs";
  auto intra = makeGroups(intraConfig(true), world);
  auto plain = makeGroups(intraConfig(false), world);
  runRanks(world, [&](int r) {
    cudaSetDevice(r);
    for (DType dtype : {DType::Float32, DType::BFloat16})
      for (size_t bytes : {size_t{4096}, size_t{1} << 20}) {
        const size_t count = bytes / elementSize(dtype);
        const auto in = input(dtype, r, count, true);
        Tensor a = onDevice(in, dtype, r), b = onDevice(in, dtype, r);
        intra[r]->allreduce(a)->wait();
        plain[r]->allreduce(b)->wait();
        cudaDeviceSynchronize();
        std::vector<uint8_t> ga(in.size()), gb(in.size());
        cudaMemcpy(ga.data(), a.data(), in.size(), cudaMemcpyDeviceToHost);
        cudaMemcpy(gb.data(), b.data(), in.size(), cudaMemcpyDeviceToHost);
        EXPECT_TRUE(ga == gb) << dtypeName(dtype) << " " << bytes << " rank " << r;
      }
    // Sizes that disagree: every rank fails (InvalidArgument from the kernels where intra
    // runs), none reports a result.
    const size_t count = r == 0 ? 2048 : 1024;
    Tensor t = onDevice(input(DType::Float32, r, count, true), DType::Float32, r);
    EXPECT_THROW(intra[r]->allreduce(t)->wait(), Error);
  });
  for (auto& g : intra) g->abort("test over");
  for (auto& g : plain) g->shutdown();
}

}  // namespace
}  // namespace commhost::test
