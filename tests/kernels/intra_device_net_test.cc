// SPDX-License-Identifier: Apache-2.0
// The intra-node allreduce kernels' body (intra_device_net.h: the device Net under
// intra::oneShot / intra::twoShot, exactly the code the CUDA kernels run) on CPU threads
// that emulate GPUs: each rank a "stream" running its launches one after another, each
// launch a grid of blocks of threads (one std::thread each), __syncthreads_or a barrier
// per block, the flags C++ atomics with the same orders, random yields shuffling the
// interleavings. Ranks run their streams independently, so a fast rank's next call
// overlaps a slow rank's previous one, as on GPUs. Checked: random sequences of one- and
// two-shot calls (every dtype and sum/avg/premul_sum, odd sizes, misaligned data) equal
// the CPU reference bit for bit; mismatched counts fail every rank with the data left
// alone, and so does every later launch; the abort word and the timeout end a wait for a
// peer that never launches. Under TSan the atomics and barriers are what orders the data.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "commhost/kernels/intra_device_net.h"

namespace commhost::kernels::intra {
namespace {

// __syncthreads_or for the threads of one emulated block.
class BlockBarrier {
 public:
  explicit BlockBarrier(int threads) : threads_(threads) {}
  bool arriveOr(bool v) {
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t generation = generation_;
    any_ = any_ || v;
    if (++arrived_ == threads_) {
      result_ = any_;
      any_ = false;
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return result_;
    }
    cv_.wait(lock, [&] { return generation_ != generation; });
    return result_;  // the next generation cannot complete before this thread arrives again
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  const int threads_;
  int arrived_ = 0;
  bool any_ = false;
  bool result_ = false;
  uint64_t generation_ = 0;
};

// One emulated GPU thread (intra_device_net.h's Env).
class CpuEnv {
 public:
  CpuEnv(unsigned tid, unsigned threads, unsigned block, BlockBarrier& barrier, uint32_t seed)
      : tid_(tid), threads_(threads), block_(block), barrier_(barrier), rng_(seed) {}
  unsigned tid() const { return tid_; }
  unsigned threads() const { return threads_; }
  unsigned block() const { return block_; }
  bool syncOr(bool v) { return barrier_.arriveOr(v); }
  uint64_t loadRelaxed(const uint64_t* p) {
    std::this_thread::yield();  // only spins use it: let the writer run (2 CPUs, many threads)
    return __atomic_load_n(p, __ATOMIC_RELAXED);
  }
  uint64_t loadAcquire(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
  uint32_t loadRelaxed32(const uint32_t* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
  void storeRelease(uint64_t* p, uint64_t v) {
    shuffle();
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
  }
  void storeRelease32(uint32_t* p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
  bool claim(uint32_t* p) {
    uint32_t expected = 0;
    return __atomic_compare_exchange_n(p, &expected, 1u, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
  }
  void fenceSystem() {}  // the release store of the code that follows orders the fields here
  uint64_t nowNs() {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count());
  }
  Vec16 load16(const void* p) {
    shuffle();
    Vec16 v;
    std::memcpy(&v, p, 16);
    return v;
  }
  void store16(void* p, const Vec16& v) {
    shuffle();
    std::memcpy(p, &v, 16);
  }

 private:
  void shuffle() {
    if ((rng_() & 31u) == 0) std::this_thread::yield();
  }
  unsigned tid_, threads_, block_;
  BlockBarrier& barrier_;
  std::minstd_rand rng_;
};

// Runs one launch: a grid of blocks x threads std::threads, as the kernel would.
void runGrid(const IntraLaunch& a, uint32_t seed) {
  const int blocks = a.config.blocks, threads = a.config.threads;
  std::vector<std::unique_ptr<BlockBarrier>> barriers;
  for (int b = 0; b < blocks; ++b) barriers.push_back(std::make_unique<BlockBarrier>(threads));
  std::vector<std::thread> grid;
  for (int b = 0; b < blocks; ++b)
    for (int t = 0; t < threads; ++t)
      grid.emplace_back([&, b, t] {
        CpuEnv env(static_cast<unsigned>(t), static_cast<unsigned>(threads), static_cast<unsigned>(b), *barriers[b],
                   seed * 7919u + static_cast<uint32_t>(b * threads + t));
        auto body = [&](auto* tag, auto fin) {
          using T = std::remove_pointer_t<decltype(tag)>;
          allreduceBody<T>(env, a, fin);
        };
        const bool scaled = a.factor != 1.0f;
        switch (a.dtype) {
          case DType::Float16:
            scaled ? body(static_cast<Float16*>(nullptr), ScaleBy<float>{a.factor})
                   : body(static_cast<Float16*>(nullptr), NoScale{});
            break;
          case DType::BFloat16:
            scaled ? body(static_cast<BFloat16*>(nullptr), ScaleBy<float>{a.factor})
                   : body(static_cast<BFloat16*>(nullptr), NoScale{});
            break;
          default:
            scaled ? body(static_cast<float*>(nullptr), ScaleBy<float>{a.factor})
                   : body(static_cast<float*>(nullptr), NoScale{});
        }
      });
  for (auto& t : grid) t.join();
}

struct HostWords {
  IntraError error;
  uint32_t abort = 0;
};

struct Aligned {
  void operator()(uint8_t* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<uint8_t, Aligned>;
Buffer alignedBuffer(size_t bytes) {
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(256, (bytes + 255) / 256 * 256));
  std::memset(p, 0, (bytes + 255) / 256 * 256);
  return Buffer(p);
}

// Small slots and thresholds so many calls of both algorithms run quickly.
IntraLimits smallLimits() {
  IntraLimits l;
  l.oneShotMax = 1024;
  l.twoShotMax = 8192;
  l.bufferBytes = 8192;
  return l;
}

// The emulated GPUs: each rank's region and host words, launched like IntraComm does.
class Machine {
 public:
  Machine(int world, int blocks, int threads) : world_(world) {
    config_ = chooseIntraConfig(blocks, smallLimits().bufferBytes);
    config_.threads = threads;
    layout_ = intraLayout(config_);
    for (int r = 0; r < world; ++r) {
      regions_.push_back(alignedBuffer(layout_.bytes));
      words_.push_back(std::make_unique<HostWords>());
    }
  }
  IntraLaunch launch(int r, void* data, size_t count, DType dtype, const ReduceOp& op, IntraAlgo algo,
                     uint64_t timeoutNs = 20'000'000'000ull) {
    IntraLaunch a;
    a.data = data;
    a.count = count;
    a.dtype = dtype;
    a.op = op.kind;
    a.factor = static_cast<float>(finalScale(op, world_));
    a.algo = algo;
    a.rank = r;
    a.world = world_;
    for (int p = 0; p < world_; ++p) a.regions[p] = regions_[p].get();
    a.config = config_;
    a.layout = layout_;
    a.stepBase = steps_[r].take(algo);
    a.signature = intraSignature(count, dtype, op.kind, algo);
    a.timeoutNs = timeoutNs;
    a.abortWord = &words_[r]->abort;
    a.error = &words_[r]->error;
    return a;
  }
  uint32_t code(int r) const { return __atomic_load_n(&words_[r]->error.code, __ATOMIC_ACQUIRE); }
  const IntraError& error(int r) const { return words_[r]->error; }
  void setAbort(int r) { __atomic_store_n(&words_[r]->abort, 1u, __ATOMIC_RELEASE); }

 private:
  int world_;
  IntraConfig config_;
  IntraLayout layout_;
  std::vector<Buffer> regions_;
  std::vector<std::unique_ptr<HostWords>> words_;
  IntraSteps steps_[kIntraMaxRanks];
};

std::vector<uint8_t> input(DType dtype, int rank, size_t count, int salt) {
  std::vector<uint8_t> out(count * elementSize(dtype) + 1);
  for (size_t i = 0; i < count; ++i) {
    const uint32_t h = static_cast<uint32_t>((i + 1) * 2654435761u ^ (rank + 7) * 40503u ^ salt * 9176u);
    setElement(out.data(), dtype, static_cast<int64_t>(i),
               static_cast<double>(static_cast<int>(h % 2001) - 1000) / 997.0);
  }
  out.resize(count * elementSize(dtype));
  return out;
}

struct Call {
  DType dtype;
  ReduceOp op;
  size_t count;
  IntraAlgo algo;
  size_t offset;  // bytes into the rank's buffer: not a multiple of 16 exercises the scalar paths
};

std::vector<Call> randomCalls(int world, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  const DType dtypes[] = {DType::Float32, DType::Float16, DType::BFloat16};
  const ReduceOp ops[] = {ReduceOp(ReduceOp::Sum), ReduceOp(ReduceOp::Avg), ReduceOp::preMulSum(0.5)};
  std::vector<Call> calls;
  for (int i = 0; i < n; ++i) {
    Call c{dtypes[rng() % 3], ops[rng() % 3], 0, IntraAlgo::None, 0};
    const size_t bytes = 16 * (rng() % 5 == 0 ? 0 : 1 + rng() % (smallLimits().bufferBytes / 16));
    c.count = bytes / elementSize(c.dtype);
    c.algo = selectAllreduce(NvlTopology::FullyConnected, world, bytes, c.dtype, c.op.kind, smallLimits());
    c.offset = rng() % 4 == 0 ? elementSize(c.dtype) : 0;
    calls.push_back(c);
  }
  return calls;
}

void runCalls(int world, int blocks, int threads, uint32_t seed) {
  const std::vector<Call> calls = randomCalls(world, 24, seed);
  Machine m(world, blocks, threads);
  // Each call's data per rank, kept to be checked after every stream ran to its end.
  std::vector<std::vector<Buffer>> data(world);
  std::vector<std::vector<std::vector<uint8_t>>> ins(calls.size());
  for (size_t k = 0; k < calls.size(); ++k)
    for (int r = 0; r < world; ++r) {
      ins[k].push_back(input(calls[k].dtype, r, calls[k].count, static_cast<int>(k)));
      data[r].push_back(alignedBuffer(ins[k][r].size() + 16));
      if (!ins[k][r].empty()) std::memcpy(data[r][k].get() + calls[k].offset, ins[k][r].data(), ins[k][r].size());
    }
  std::vector<std::thread> streams;
  for (int r = 0; r < world; ++r)
    streams.emplace_back([&, r] {
      for (size_t k = 0; k < calls.size(); ++k) {
        const Call& c = calls[k];
        const IntraLaunch a = m.launch(r, data[r][k].get() + c.offset, c.count, c.dtype, c.op, c.algo);
        runGrid(a, seed + static_cast<uint32_t>(k * 131 + r));
      }
    });
  for (auto& s : streams) s.join();
  for (int r = 0; r < world; ++r)
    ASSERT_EQ(m.code(r), kIntraOk) << "rank " << r << ": " << describeIntraError(m.error(r));
  for (size_t k = 0; k < calls.size(); ++k) {
    const Call& c = calls[k];
    const size_t bytes = c.count * elementSize(c.dtype);
    std::vector<uint8_t> want(bytes);
    std::vector<const void*> srcs;
    for (const auto& in : ins[k]) srcs.push_back(in.data());
    if (c.count)
      reduceSourcesBuffer(want.data(), srcs.data(), world, c.count, c.dtype, c.op.kind, finalScale(c.op, world));
    if (bytes == 0) continue;  // memcmp of no bytes may still not be given a null pointer
    for (int r = 0; r < world; ++r)
      ASSERT_EQ(std::memcmp(data[r][k].get() + c.offset, want.data(), bytes), 0)
          << "call " << k << " rank " << r << ": "
          << describeIntraSignature(intraSignature(c.count, c.dtype, c.op.kind, c.algo)) << " offset " << c.offset
          << " (world " << world << ")";
  }
}

TEST(IntraDeviceNet, RandomOneAndTwoShotSequencesMatchTheCpuReferenceBitForBit) {
  runCalls(2, 3, 4, 1);
  runCalls(3, 2, 4, 2);
  runCalls(4, 3, 4, 3);
}

TEST(IntraDeviceNet, OneBlockAndWideBlocksToo) {
  runCalls(2, 1, 2, 4);   // as few threads as ranks
  runCalls(3, 4, 16, 5);  // several threads per vector loop
}

TEST(IntraDeviceNet, MismatchedCountsFailEveryRankAndLaterLaunchesDoNothing) {
  constexpr int kWorld = 3;
  Machine m(kWorld, 2, 4);
  std::vector<std::vector<uint8_t>> ins, got;
  std::vector<Buffer> data;
  for (int r = 0; r < kWorld; ++r) {
    const size_t count = r == 2 ? 64 : 128;  // rank 2 disagrees
    ins.push_back(input(DType::Float32, r, count, 0));
    data.push_back(alignedBuffer(ins[r].size()));
    std::memcpy(data[r].get(), ins[r].data(), ins[r].size());
  }
  std::vector<std::thread> streams;
  for (int r = 0; r < kWorld; ++r)
    streams.emplace_back([&, r] {
      const size_t count = ins[r].size() / 4;
      runGrid(m.launch(r, data[r].get(), count, DType::Float32, ReduceOp::Sum, IntraAlgo::OneShot), r);
      // The next launch finds the claim set and returns at once, touching nothing.
      runGrid(m.launch(r, data[r].get(), count, DType::Float32, ReduceOp::Sum, IntraAlgo::OneShot, 1'000'000), r);
    });
  for (auto& s : streams) s.join();
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_EQ(m.code(r), kIntraMismatch) << "rank " << r << ": " << describeIntraError(m.error(r));
    EXPECT_EQ(m.error(r).stepBase, 0u);
    EXPECT_EQ(std::memcmp(data[r].get(), ins[r].data(), ins[r].size()), 0) << "rank " << r << "'s data changed";
  }
  EXPECT_EQ(m.error(2).mine, intraSignature(64, DType::Float32, ReduceOp::Sum, IntraAlgo::OneShot));
  EXPECT_EQ(m.error(2).theirs, intraSignature(128, DType::Float32, ReduceOp::Sum, IntraAlgo::OneShot));
}

TEST(IntraDeviceNet, TheAbortWordEndsAWaitForAPeerThatNeverLaunches) {
  Machine m(2, 2, 4);
  const auto in = input(DType::BFloat16, 1, 256, 0);
  Buffer data = alignedBuffer(in.size());
  std::memcpy(data.get(), in.data(), in.size());
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    m.setAbort(1);
  });
  runGrid(m.launch(1, data.get(), 256, DType::BFloat16, ReduceOp::Sum, IntraAlgo::TwoShot, 0), 9);  // no timeout
  aborter.join();
  ASSERT_EQ(m.code(1), kIntraAborted) << describeIntraError(m.error(1));
  EXPECT_EQ(m.error(1).peer, 0);
  EXPECT_EQ(m.error(1).wait, kIntraWaitPosted);
  EXPECT_EQ(std::memcmp(data.get(), in.data(), in.size()), 0);
}

TEST(IntraDeviceNet, TheTimeoutEndsAWaitForAPeerThatNeverLaunches) {
  Machine m(2, 1, 2);
  const auto in = input(DType::Float32, 0, 64, 0);
  Buffer data = alignedBuffer(in.size());
  std::memcpy(data.get(), in.data(), in.size());
  const auto started = std::chrono::steady_clock::now();
  runGrid(m.launch(0, data.get(), 64, DType::Float32, ReduceOp::Sum, IntraAlgo::OneShot, 50'000'000), 3);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10));
  ASSERT_EQ(m.code(0), kIntraTimeout) << describeIntraError(m.error(0));
  EXPECT_EQ(m.error(0).peer, 1);
  EXPECT_EQ(std::memcmp(data.get(), in.data(), in.size()), 0);
}

}  // namespace
}  // namespace commhost::kernels::intra
