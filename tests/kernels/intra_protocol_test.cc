// SPDX-License-Identifier: Apache-2.0
// The intra-node allreduce protocol (commhost/kernels/intra_protocol.h), the schedule the
// shm backend and the CUDA one-/two-shot kernels both run, on CPU threads over a checking
// Net. The Net enforces the contract instead of trusting it: every buffer slot carries the
// step it holds, set when its owner begins writing it; a read checks the tag when it
// starts and again when the reader ends the step, so a writer that reused a slot while a
// peer still read it is caught, as is any call out of order (peerPrevious before peer,
// post before begin, ...). Random yields and sleeps shuffle the interleavings. Two
// broken variants show the checks can fail.
#include "commhost/kernels/intra_protocol.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "commhost/kernels/reduce.h"
#include "commhost/types.h"

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define COMMHOST_TEST_TSAN 1
#endif
#endif

namespace commhost::kernels::intra {
namespace {

struct Violation : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What the ranks share: depth slots per rank, their tags, and the posted/consumed counters.
struct Shared {
  Shared(int world, int depth, size_t slotBytes)
      : world(world), depth(depth), slotBytes(slotBytes), posted(world), consumed(world) {
    buffers.resize(static_cast<size_t>(world * depth), std::vector<uint8_t>(slotBytes));
    tags = std::make_unique<std::atomic<int64_t>[]>(static_cast<size_t>(world * depth));
    for (int i = 0; i < world * depth; ++i) tags[i].store(-1);
    for (auto& c : posted) c.store(0);
    for (auto& c : consumed) c.store(0);
  }
  size_t slot(int rank, uint64_t step) const { return static_cast<size_t>(rank * depth) + step % depth; }
  void fail(const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex);
    if (firstFailure.empty()) firstFailure = what;
    failed.store(true);
  }

  const int world, depth;
  const size_t slotBytes;
  std::vector<std::vector<uint8_t>> buffers;
  std::unique_ptr<std::atomic<int64_t>[]> tags;
  std::vector<std::atomic<uint64_t>> posted, consumed;
  std::atomic<bool> failed{false};
  std::mutex mutex;
  std::string firstFailure;
};

// Knobs for the broken variants.
struct Faults {
  bool skipConsumedWait = false;  // begin() overwrites without waiting for the readers
  int slowCopyRank = -1;          // this rank sleeps in every copy out of a peer's buffer
};

class CheckingNet {
 public:
  CheckingNet(Shared& shared, int rank, DType dtype, uint32_t seed, Faults faults = {})
      : s_(shared),
        rank_(rank),
        dtype_(dtype),
        es_(elementSize(dtype)),
        sources_(shared.world),
        rng_(seed),
        faults_(faults) {}

  int rank() const { return rank_; }
  int world() const { return s_.world; }
  uint64_t steps() const { return step_; }

  uint8_t* begin() {
    expectPhase(Phase::Idle, "begin");
    jitter();
    if (!faults_.skipConsumedWait && step_ + 2 > static_cast<uint64_t>(s_.depth))
      for (int p = 0; p < s_.world; ++p) waitFor(s_.consumed[p], step_ + 2 - s_.depth, p, "consumed");
    s_.tags[s_.slot(rank_, step_)].store(static_cast<int64_t>(step_));
    phase_ = Phase::Begun;
    readPeer_.assign(s_.world, false);
    reads_.clear();
    return own(step_);
  }
  void post() {
    expectPhase(Phase::Begun, "post");
    jitter();
    s_.posted[rank_].store(step_ + 1, std::memory_order_release);
    phase_ = Phase::Posted;
  }
  const uint8_t* peer(int p) {
    expectPhase(Phase::Posted, "peer");
    if (p != rank_) waitFor(s_.posted[p], step_ + 1, p, "posted");
    readPeer_[p] = true;
    return read(p, step_);
  }
  const uint8_t* peerPrevious(int p) {
    expectPhase(Phase::Posted, "peerPrevious");
    if (!readPeer_[p] || step_ == 0)
      violate("peerPrevious(" + std::to_string(p) + ") without peer(" + std::to_string(p) + ") in this step");
    return read(p, step_ - 1);
  }
  uint8_t* previous() {
    if (phase_ == Phase::Idle || step_ == 0) violate("previous() outside a step or in the first step");
    return own(step_ - 1);
  }
  void end() {
    expectPhase(Phase::Posted, "end");
    jitter();
    for (const auto& r : reads_)  // nobody reused what this step read
      if (s_.tags[s_.slot(r.peer, r.step)].load() != static_cast<int64_t>(r.step))
        violate("rank " + std::to_string(r.peer) + " overwrote its buffer of step " + std::to_string(r.step) +
                " (now step " + std::to_string(s_.tags[s_.slot(r.peer, r.step)].load()) + ") while rank " +
                std::to_string(rank_) + " still read it in step " + std::to_string(step_));
    s_.consumed[rank_].store(step_ + 1, std::memory_order_release);
    ++step_;
    phase_ = Phase::Idle;
  }
  const void** sources() { return sources_.data(); }
  void copy(void* dst, const void* src, size_t n) {
    if (rank_ == faults_.slowCopyRank && isPeerBuffer(src)) std::this_thread::sleep_for(std::chrono::milliseconds(30));
    checkRange(dst, n);
    if (n) std::memcpy(dst, src, n * es_);
  }
  void reduce(void* dst, const void* const* srcs, size_t n) {
    checkRange(dst, n);
    reduceSourcesBuffer(dst, srcs, s_.world, n, dtype_, ReduceOp::Sum);
  }

 private:
  enum class Phase { Idle, Begun, Posted };
  struct Read {
    int peer;
    uint64_t step;
  };

  uint8_t* own(uint64_t step) { return s_.buffers[s_.slot(rank_, step)].data(); }
  const uint8_t* read(int p, uint64_t step) {
    const int64_t tag = s_.tags[s_.slot(p, step)].load();
    if (tag != static_cast<int64_t>(step))
      violate("rank " + std::to_string(p) + "'s buffer holds step " + std::to_string(tag) + ", not step " +
              std::to_string(step));
    reads_.push_back({p, step});
    return s_.buffers[s_.slot(p, step)].data();
  }
  bool isPeerBuffer(const void* src) const {
    for (int p = 0; p < s_.world; ++p)
      for (int d = 0; d < s_.depth; ++d) {
        const auto& b = s_.buffers[static_cast<size_t>(p * s_.depth + d)];
        if (p != rank_ && src >= b.data() && src < b.data() + b.size()) return true;
      }
    return false;
  }
  // A write into a slot must stay inside it (a write into the caller's data is not checked).
  void checkRange(const void* dst, size_t n) {
    for (const auto& b : s_.buffers)
      if (dst >= b.data() && dst < b.data() + b.size() &&
          static_cast<const uint8_t*>(dst) + n * es_ > b.data() + b.size())
        violate("a write of " + std::to_string(n) + " elements runs past its buffer");
  }
  void expectPhase(Phase want, const char* call) {
    if (phase_ != want) violate(std::string(call) + "() out of order in step " + std::to_string(step_));
  }
  void waitFor(const std::atomic<uint64_t>& counter, uint64_t target, int p, const char* what) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (counter.load(std::memory_order_acquire) < target) {
      if (s_.failed.load()) throw Violation("another rank failed");
      if (std::chrono::steady_clock::now() > deadline)
        violate("rank " + std::to_string(rank_) + " waited 10 s for " + what + "[" + std::to_string(p) +
                "] >= " + std::to_string(target));
      std::this_thread::yield();
    }
  }
  void jitter() {
    const uint32_t r = rng_() % 16;
    if (r == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
    if (r < 4) std::this_thread::yield();
  }
  [[noreturn]] void violate(const std::string& what) {
    s_.fail(what);
    throw Violation(what);
  }

  Shared& s_;
  const int rank_;
  const DType dtype_;
  const size_t es_;
  std::vector<const void*> sources_;
  std::mt19937 rng_;
  Faults faults_;
  uint64_t step_ = 0;
  Phase phase_ = Phase::Idle;
  std::vector<bool> readPeer_;
  std::vector<Read> reads_;
};

enum class Algo { OneShot, TwoShot };

// Rank r's element i of op j: small integers, so every sum is exact in f16 too.
double inputValue(int op, int rank, size_t i) {
  return static_cast<double>(static_cast<int>((op * 7 + rank * 3 + static_cast<int>(i % 13)) % 9) - 4);
}

// Runs `ops` allreduces (alternating algorithms when both) on `world` threads; returns
// the first violation or wrong element, "" when every rank got the exact sum.
std::string runOps(int world, int depth, DType dtype, const std::vector<size_t>& sizes, const std::vector<Algo>& algos,
                   Faults faults = {}, Algo brokenTwoShot = Algo::OneShot) {
  const size_t es = elementSize(dtype);
  size_t most = 0;
  for (size_t n : sizes) most = std::max(most, n);
  Shared shared(world, depth, std::max<size_t>(most * es, 1));
  std::vector<uint64_t> steps(world);
  std::vector<std::string> wrong(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      CheckingNet net(shared, r, dtype, 1234u + 77u * r, faults);
      try {
        for (size_t j = 0; j < sizes.size(); ++j) {
          const size_t n = sizes[j];
          std::vector<uint8_t> data(n * es + 1);
          for (size_t i = 0; i < n; ++i) setElement(data.data(), dtype, static_cast<int64_t>(i), inputValue(j, r, i));
          const Algo algo = algos[j % algos.size()];
          if (algo == Algo::OneShot) {
            oneShot(net, data.data(), n, es);
          } else if (brokenTwoShot == Algo::TwoShot) {
            // Step B reads the owners' step-A buffers without waiting for their step-B post.
            const Slices s = twoShotSlices(n, world, 4);
            twoShot(net, data.data(), 0, es, 4);  // keeps the step count; then a broken B:
            net.begin();
            net.post();
            for (int p = 0; p < world; ++p)
              if (p != r && s.count(p)) net.peerPrevious(p);
            net.end();
          } else {
            twoShot(net, data.data(), n, es, std::max<size_t>(1, 16 / es));
          }
          for (size_t i = 0; i < n && wrong[r].empty(); ++i) {
            double want = 0;
            for (int p = 0; p < world; ++p) want += inputValue(j, p, i);
            const double got = getElement(data.data(), dtype, static_cast<int64_t>(i));
            if (got != want)
              wrong[r] = "op " + std::to_string(j) + " rank " + std::to_string(r) + " element " + std::to_string(i) +
                         ": " + std::to_string(got) + " != " + std::to_string(want);
          }
        }
      } catch (const Violation&) {
      }
      steps[r] = net.steps();
    });
  for (auto& t : threads) t.join();
  if (shared.failed.load()) return shared.firstFailure;
  for (const auto& w : wrong)
    if (!w.empty()) return w;
  for (int r = 1; r < world; ++r)
    if (steps[r] != steps[0]) return "ranks ran different step counts";
  return "";
}

const std::vector<size_t> kSizes = {0, 1, 7, 64, 1000, 4097, 3, 256};

TEST(IntraProtocol, BothAlgorithmsGiveTheExactSumOnEveryRankWithNoHazard) {
  for (int world : {1, 2, 3, 4, 5, 8})
    for (int depth : {2, 3})
      for (DType dtype : {DType::Float16, DType::Float32, DType::Int64}) {
        SCOPED_TRACE("world " + std::to_string(world) + " depth " + std::to_string(depth) + " " + dtypeName(dtype));
        EXPECT_EQ(runOps(world, depth, dtype, kSizes, {Algo::OneShot}), "");
        EXPECT_EQ(runOps(world, depth, dtype, kSizes, {Algo::TwoShot}), "");
        EXPECT_EQ(runOps(world, depth, dtype, kSizes, {Algo::OneShot, Algo::TwoShot}), "");
      }
}

TEST(IntraProtocol, StepCountsAreWhatTheNetsAdvanceBy) {
  Shared shared(3, 3, 64);
  std::vector<uint64_t> steps(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      CheckingNet net(shared, r, DType::Float32, 9u + r);
      float data[16] = {};
      oneShot(net, reinterpret_cast<uint8_t*>(data), 16, 4);
      EXPECT_EQ(net.steps(), static_cast<uint64_t>(kOneShotSteps));
      twoShot(net, reinterpret_cast<uint8_t*>(data), 16, 4, 4);
      steps[r] = net.steps();
    });
  for (auto& t : threads) t.join();
  for (uint64_t s : steps) EXPECT_EQ(s, static_cast<uint64_t>(kOneShotSteps + kTwoShotSteps));
}

TEST(IntraProtocol, SlicesCoverEveryElementOnceAlignedAndInRankOrder) {
  for (int world = 1; world <= 8; ++world)
    for (size_t n : {size_t{0}, size_t{1}, size_t{5}, size_t{63}, size_t{64}, size_t{65}, size_t{1000}})
      for (size_t align : {size_t{1}, size_t{4}, size_t{16}}) {
        const Slices s = twoShotSlices(n, world, align);
        EXPECT_EQ(s.lo(0), 0u);
        EXPECT_EQ(s.lo(world), n);
        for (int r = 0; r < world; ++r) {
          EXPECT_LE(s.lo(r), s.lo(r + 1));
          if (s.lo(r) < n) {
            EXPECT_EQ(s.lo(r) % align, 0u) << "world " << world << " n " << n << " rank " << r;
          }
        }
      }
}

// The checks can fail: without begin()'s wait for the readers, a rank that finished
// step B overwrites its step-A buffer while a slow peer still copies out of it.
TEST(IntraProtocol, CatchesAWriterThatReusesABufferAPeerStillReads) {
#if defined(__SANITIZE_THREAD__) || defined(COMMHOST_TEST_TSAN)
  GTEST_SKIP() << "the broken writer races on the buffer for real, which TSan reports as it should";
#endif
  Faults faults;
  faults.skipConsumedWait = true;
  faults.slowCopyRank = 1;
  const std::string failure = runOps(2, 2, DType::Float32, {64, 64, 64, 64}, {Algo::TwoShot}, faults);
  // Caught while reading ("overwrote") or, if the writer was quicker, when starting to read.
  EXPECT_TRUE(failure.find("overwrote its buffer") != std::string::npos ||
              failure.find("buffer holds step") != std::string::npos)
      << failure;
  // The same slow reader with the wait in place: no hazard.
  faults.skipConsumedWait = false;
  EXPECT_EQ(runOps(2, 2, DType::Float32, {64, 64, 64, 64}, {Algo::TwoShot}, faults), "");
}

TEST(IntraProtocol, CatchesAReadOfAPeersBufferBeforeItsPost) {
  const std::string failure = runOps(3, 3, DType::Float32, {64}, {Algo::TwoShot}, {}, Algo::TwoShot);
  EXPECT_NE(failure.find(") without peer("), std::string::npos) << failure;
}

}  // namespace
}  // namespace commhost::kernels::intra
