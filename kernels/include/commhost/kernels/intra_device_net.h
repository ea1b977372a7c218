// SPDX-License-Identifier: Apache-2.0
// The body of the intra-node allreduce kernels (intra_allreduce.h): the device Net that
// intra::oneShot / intra::twoShot run over, written against an execution environment
// `Env` so the same code runs in the CUDA kernels (CudaEnv in intra_allreduce.cu: thread
// and block indices, __syncthreads_or, PTX acquire/release at system scope, 16-byte
// vector loads) and on CPU threads that emulate a grid (tests/kernels/
// intra_device_net_test.cc), where it is checked against the CPU reference without a GPU.
//
// Env, per emulated GPU thread (all COMMHOST_HD):
//   unsigned tid(), threads(), block();
//   bool syncOr(bool);                      __syncthreads_or
//   uint64_t loadRelaxed(const uint64_t*), loadAcquire(const uint64_t*);   system scope
//   uint32_t loadRelaxed32(const uint32_t*);
//   void storeRelease(uint64_t*, uint64_t), storeRelease32(uint32_t*, uint32_t);
//   bool claim(uint32_t*);                  atomic 0 -> 1; true for the one that set it
//   void fenceSystem();
//   uint64_t nowNs();
//   Vec16 load16(const void*); void store16(void*, const Vec16&);   aligned 16 bytes
#pragma once

#include <cstddef>
#include <cstdint>

#include "commhost/kernels/intra_allreduce.h"
#include "commhost/kernels/intra_protocol.h"
#include "commhost/kernels/reduce.h"

namespace commhost::kernels::intra {

struct alignas(16) Vec16 {
  uint32_t w[4];
};

template <class T> struct Lanes {
  static constexpr size_t kCount = 16 / sizeof(T);
  union Pack {
    Vec16 v;
    T e[kCount];
  };
};

// The claim word in this rank's region: non-zero once any launch recorded a failure.
COMMHOST_HD inline uint32_t* claimWord(const IntraLaunch& a) {
  return reinterpret_cast<uint32_t*>(a.regions[a.rank] + a.layout.claim);
}

// The first failure wins the record; later ones (other blocks, or this block's next wait)
// leave it alone. `code` goes last so the host never reads a code without its fields.
template <class Env>
COMMHOST_HD void record(Env& env, const IntraLaunch& a, uint32_t code, int peer, uint32_t wait, uint64_t step,
                        uint64_t theirs = 0) {
  if (!env.claim(claimWord(a))) return;
  volatile IntraError* e = a.error;
  e->block = env.block();
  e->peer = peer;
  e->wait = wait;
  e->step = step;
  e->stepBase = a.stepBase;
  e->mine = a.signature;
  e->theirs = theirs;
  env.fenceSystem();
  env.storeRelease32(&a.error->code, code);
}

// Spins until *word >= target; false when it gave up: the abort word, the timeout (both
// recorded), or a failure another block already recorded. Those are looked at every 1024
// polls (the abort word is host memory, a PCIe read).
template <class Env>
COMMHOST_HD bool waitFor(Env& env, const IntraLaunch& a, const uint64_t* word, uint64_t target, int peer, uint32_t wait,
                         uint64_t step) {
  if (env.loadRelaxed(word) < target) {
    const uint64_t start = env.nowNs();
    for (uint32_t i = 1; env.loadRelaxed(word) < target; ++i) {
      if ((i & 1023u) != 0) continue;
      if (env.loadRelaxed32(claimWord(a)) != 0) return false;
      if (env.loadRelaxed32(a.abortWord) != 0) {
        record(env, a, kIntraAborted, peer, wait, step);
        return false;
      }
      if (a.timeoutNs != 0 && env.nowNs() - start > a.timeoutNs) {
        record(env, a, kIntraTimeout, peer, wait, step);
        return false;
      }
    }
  }
  // Synchronises with the writer's release store (this one or a later one of the same
  // thread, which its program order puts after the step's writes).
  (void)env.loadAcquire(word);
  return true;
}

// The Net of intra_protocol.h for one thread of the grid. Every thread of a block calls
// the same methods in the same order (the protocol depends on rank, world and n only), so
// the barriers in them are reached by all; failed_ changes only through syncOr, so it is
// the same in every thread of the block.
template <class T, class Fin, class Env> class DeviceNet {
 public:
  COMMHOST_HD DeviceNet(Env& env, const IntraLaunch& a, Fin fin) : env_(env), a_(a), fin_(fin), step_(a.stepBase) {}
  COMMHOST_HD int rank() const { return a_.rank; }
  COMMHOST_HD int world() const { return a_.world; }

  // Waits until every block of every peer finished reading what this slot held (depth
  // steps ago, or one later through peerPrevious): consumed >= s + 2 - depth. Every block,
  // not only this one, since the slot's readers may have split another call's range
  // differently. (With the protocols here this is also implied by the previous launch
  // having ended: its last step waited for every block of every peer to post it. The wait
  // is a pass over local flags and keeps the slot safe without that argument.)
  COMMHOST_HD uint8_t* begin() {
    const uint64_t depth = static_cast<uint64_t>(a_.config.depth);
    if (!failed_ && step_ + 2 > depth) {
      const uint64_t need = step_ + 2 - depth;
      const int pairs = a_.config.blocks * a_.world;
      bool bad = false;
      for (int i = static_cast<int>(env_.tid()); i < pairs && !bad; i += static_cast<int>(env_.threads())) {
        const int b = i / a_.world, p = i % a_.world;
        if (p != a_.rank)
          bad = !waitFor(env_, a_, flag(a_.rank, a_.layout.consumed, b, p), need, p, kIntraWaitConsumed, step_);
      }
      failed_ = env_.syncOr(bad);
    }
    return slot(a_.rank, step_);
  }

  // Thread t publishes this block's step to peer t (and, in a call's first step, the
  // call's signature beside it) once the barrier saw every thread's writes.
  COMMHOST_HD void post() {
    (void)env_.syncOr(false);
    if (failed_) return;
    const int t = static_cast<int>(env_.tid());
    if (t < a_.world && t != a_.rank) {
      if (step_ == a_.stepBase) *static_cast<volatile uint64_t*>(signature(t, a_.rank)) = a_.signature;
      env_.storeRelease(flag(t, a_.layout.posted, static_cast<int>(env_.block()), a_.rank), step_ + 1);
    }
  }

  // Thread 0 waits for p's post of this step (and in a call's first step compares the
  // signatures); the barrier then lets the whole block read.
  COMMHOST_HD const uint8_t* peer(int p) {
    if (p != a_.rank && !failed_) {
      bool bad = false;
      if (env_.tid() == 0) {
        const uint64_t* posted = flag(a_.rank, a_.layout.posted, static_cast<int>(env_.block()), p);
        bad = !waitFor(env_, a_, posted, step_ + 1, p, kIntraWaitPosted, step_);
        if (!bad && step_ == a_.stepBase) {
          const uint64_t theirs = *static_cast<volatile uint64_t*>(signature(a_.rank, p));
          if (theirs != a_.signature) {
            record(env_, a_, kIntraMismatch, p, 0, step_, theirs);
            bad = true;
          }
        }
      }
      failed_ = env_.syncOr(bad);
    }
    return slot(p, step_);
  }
  COMMHOST_HD const uint8_t* peerPrevious(int p) const { return slot(p, step_ - 1); }
  COMMHOST_HD uint8_t* previous() const { return slot(a_.rank, step_ - 1); }

  COMMHOST_HD void end() {
    if (!failed_) {
      (void)env_.syncOr(false);  // every thread's reads of this step are done
      const int t = static_cast<int>(env_.tid());
      if (t < a_.world && t != a_.rank)
        env_.storeRelease(flag(t, a_.layout.consumed, static_cast<int>(env_.block()), a_.rank), step_ + 1);
    }
    ++step_;
  }

  COMMHOST_HD const void** sources() { return sources_; }

  COMMHOST_HD void copy(void* dst, const void* src, size_t n) {
    if (failed_) return;
    size_t lo = 0, hi = 0;
    share(n, &lo, &hi);
    auto* d = static_cast<uint8_t*>(dst) + lo * sizeof(T);
    const auto* s = static_cast<const uint8_t*>(src) + lo * sizeof(T);
    const size_t bytes = (hi - lo) * sizeof(T);
    size_t done = 0;
    if (((reinterpret_cast<uintptr_t>(d) | reinterpret_cast<uintptr_t>(s)) & 15u) == 0) {
      done = bytes / 16 * 16;
      for (size_t i = env_.tid(); i < bytes / 16; i += env_.threads())
        env_.store16(d + 16 * i, env_.load16(s + 16 * i));
    }
    for (size_t i = done + env_.tid(); i < bytes; i += env_.threads()) d[i] = s[i];
  }

  // Folds the sources in rank order in the compute type and applies Fin once, as
  // reduceSources does on the CPU: every rank that reduces a slice gets the same bits.
  COMMHOST_HD void reduce(void* dst, const void* const* srcs, size_t n) {
    if (failed_) return;
    size_t lo = 0, hi = 0;
    share(n, &lo, &hi);
    T* d = static_cast<T*>(dst);
    uintptr_t bits = reinterpret_cast<uintptr_t>(dst);
    for (int p = 0; p < a_.world; ++p) bits |= reinterpret_cast<uintptr_t>(srcs[p]);
    constexpr size_t kN = Lanes<T>::kCount;
    using Pack = typename Lanes<T>::Pack;
    using C = typename Compute<T>::type;
    if ((bits & 15u) == 0) {  // lo is a multiple of kN (share), so every vector is aligned
      const size_t vecs = (hi - lo) / kN;
      for (size_t i = env_.tid(); i < vecs; i += env_.threads()) {
        const size_t at = (lo + i * kN) * sizeof(T);
        Pack in;
        in.v = env_.load16(static_cast<const uint8_t*>(srcs[0]) + at);
        C acc[kN];
        for (size_t j = 0; j < kN; ++j) acc[j] = load(in.e[j]);
        for (int p = 1; p < a_.world; ++p) {
          in.v = env_.load16(static_cast<const uint8_t*>(srcs[p]) + at);
          for (size_t j = 0; j < kN; ++j) acc[j] = SumFn{}(acc[j], load(in.e[j]));
        }
        Pack out;
        for (size_t j = 0; j < kN; ++j) out.e[j] = store<T>(fin_(acc[j]));
        env_.store16(reinterpret_cast<uint8_t*>(d) + at, out.v);
      }
      lo += vecs * kN;
    }
    for (size_t i = lo + env_.tid(); i < hi; i += env_.threads()) {
      C acc = load(static_cast<const T*>(srcs[0])[i]);
      for (int p = 1; p < a_.world; ++p) acc = SumFn{}(acc, load(static_cast<const T*>(srcs[p])[i]));
      d[i] = store<T>(fin_(acc));
    }
  }

 private:
  COMMHOST_HD uint8_t* slot(int r, uint64_t step) const {
    return a_.regions[r] + (step % static_cast<uint64_t>(a_.config.depth)) * a_.config.slotBytes;
  }
  COMMHOST_HD uint64_t* flag(int region, size_t offset, int block, int peer) const {
    return reinterpret_cast<uint64_t*>(a_.regions[region] + offset) + block * kIntraMaxRanks + peer;
  }
  // Where `peer` leaves this step's signature for this block in `region`.
  COMMHOST_HD uint64_t* signature(int region, int peer) const {
    const uint64_t s = step_ % static_cast<uint64_t>(a_.config.depth);
    return reinterpret_cast<uint64_t*>(a_.regions[region] + a_.layout.signatures) +
           (s * static_cast<uint64_t>(a_.config.blocks) + env_.block()) * kIntraMaxRanks + peer;
  }
  // This block's share [lo, hi) of a range of n elements: the same on every rank for the
  // same n, in whole 16-byte vectors.
  COMMHOST_HD void share(size_t n, size_t* lo, size_t* hi) const {
    constexpr size_t kN = Lanes<T>::kCount;
    const size_t blocks = static_cast<size_t>(a_.config.blocks);
    const size_t per = ((n + blocks - 1) / blocks + kN - 1) / kN * kN;
    *lo = minSize(n, env_.block() * per);
    *hi = minSize(n, *lo + per);
  }

  Env& env_;
  const IntraLaunch& a_;
  Fin fin_;
  uint64_t step_;
  bool failed_ = false;
  const void* sources_[kIntraMaxRanks] = {};
};

// What every thread of the grid runs.
template <class T, class Fin, class Env> COMMHOST_HD void allreduceBody(Env& env, const IntraLaunch& a, Fin fin) {
  // After a failure the step counters of the ranks no longer agree: touch nothing (the
  // host fails this launch's work from the record). The abort word is not read here (a
  // PCIe round trip per launch): a launch queued before an abort finishes normally when
  // its peers do, and otherwise meets the word in its first long wait.
  if (env.syncOr(env.tid() == 0 && env.loadRelaxed32(claimWord(a)) != 0)) return;
  DeviceNet<T, Fin, Env> net(env, a, fin);
  auto* data = static_cast<uint8_t*>(a.data);
  if (a.algo == IntraAlgo::TwoShot) twoShot(net, data, a.count, sizeof(T), Lanes<T>::kCount);
  else oneShot(net, data, a.count, sizeof(T));
}

}  // namespace commhost::kernels::intra
