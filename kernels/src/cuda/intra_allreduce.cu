// SPDX-License-Identifier: Apache-2.0
// The intra-node one-shot / two-shot allreduce kernels: every thread of the grid runs
// intra::oneShot / intra::twoShot (intra_protocol.h) over DeviceNet below. The layout, the
// flags and the ordering argument are in intra_allreduce.h.
#include <cuda_runtime.h>

#include "commhost/kernels/intra_allreduce.h"
#include "commhost/kernels/intra_protocol.h"
#include "commhost/kernels/reduce.h"

namespace commhost::kernels {
namespace {

// System-scope flags: the writer is another GPU (stores over NVLink into this GPU's
// memory), so gpu scope would not order its data writes before the flag.
__device__ __forceinline__ uint64_t loadAcquire(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint64_t loadRelaxed(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint32_t loadRelaxed32(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void storeRelease(uint64_t* p, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void storeRelease32(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ uint64_t nowNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// The first failure wins the record; later ones (other blocks, or this block's next wait)
// leave it alone. `code` goes last so the host never reads a code without its fields.
__device__ void record(const IntraLaunch& a, uint32_t code, int peer, uint32_t wait, uint64_t step,
                       uint64_t theirs = 0) {
  IntraError* e = a.error;
  if (atomicCAS_system(&e->claim, 0u, 1u) != 0u) return;
  volatile IntraError* v = e;
  v->block = blockIdx.x;
  v->peer = peer;
  v->wait = wait;
  v->step = step;
  v->stepBase = a.stepBase;
  v->mine = a.signature;
  v->theirs = theirs;
  __threadfence_system();
  storeRelease32(&e->code, code);
}

// Spins until *word >= target; false when it gave up: the abort word, the timeout (both
// recorded), or a failure another block already recorded. The abort word and the error
// record live in host memory (a PCIe read each), so they are looked at every 1024 polls.
__device__ bool waitFor(const IntraLaunch& a, const uint64_t* word, uint64_t target, int peer, uint32_t wait,
                        uint64_t step) {
  if (loadRelaxed(word) < target) {
    const uint64_t start = nowNs();
    for (uint32_t i = 1; loadRelaxed(word) < target; ++i) {
      if ((i & 1023u) != 0) continue;
      if (loadRelaxed32(&a.error->claim) != 0) return false;
      if (loadRelaxed32(a.abortWord) != 0) {
        record(a, kIntraAborted, peer, wait, step);
        return false;
      }
      if (a.timeoutNs != 0 && nowNs() - start > a.timeoutNs) {
        record(a, kIntraTimeout, peer, wait, step);
        return false;
      }
    }
  }
  // Synchronises with the writer's release store (this one or a later one of the same
  // thread, which its program order puts after the step's writes).
  (void)loadAcquire(word);
  return true;
}

template <class T> struct Vec {
  static constexpr size_t kElems = 16 / sizeof(T);
  union Pack {
    uint4 v;
    T e[kElems];
  };
};

// The Net of intra_protocol.h for one thread of the grid. Every thread of a block calls
// the same methods in the same order (the protocol depends on rank, world and n only), so
// __syncthreads in them is reached by all; failed_ changes only through
// __syncthreads_or, so it is the same in every thread of the block.
template <class T, class Fin> class DeviceNet {
 public:
  __device__ DeviceNet(const IntraLaunch& a, Fin fin) : a_(a), fin_(fin), step_(a.stepBase) {}
  __device__ int rank() const { return a_.rank; }
  __device__ int world() const { return a_.world; }

  // Waits until every block of every peer finished reading what this slot held (depth
  // steps ago, or one later through peerPrevious): consumed >= s + 2 - depth.
  __device__ uint8_t* begin() {
    const uint64_t depth = static_cast<uint64_t>(a_.config.depth);
    if (!failed_ && step_ + 2 > depth) {
      const uint64_t need = step_ + 2 - depth;
      const int pairs = a_.config.blocks * a_.world;
      bool bad = false;
      for (int i = static_cast<int>(threadIdx.x); i < pairs && !bad; i += static_cast<int>(blockDim.x)) {
        const int b = i / a_.world, p = i % a_.world;
        if (p != a_.rank)
          bad = !waitFor(a_, flag(a_.rank, a_.layout.consumed, b, p), need, p, kIntraWaitConsumed, step_);
      }
      failed_ = __syncthreads_or(bad);
    }
    return slot(a_.rank, step_);
  }

  // Thread t publishes this block's step to peer t (and, in a call's first step, the
  // call's signature beside it) once the barrier saw every thread's writes.
  __device__ void post() {
    __syncthreads();
    if (failed_) return;
    const int t = static_cast<int>(threadIdx.x);
    if (t < a_.world && t != a_.rank) {
      if (step_ == a_.stepBase) *static_cast<volatile uint64_t*>(signature(t, blockIdx.x, a_.rank)) = a_.signature;
      storeRelease(flag(t, a_.layout.posted, blockIdx.x, a_.rank), step_ + 1);
    }
  }

  __device__ const uint8_t* peer(int p) {
    if (p != a_.rank && !failed_) {
      bool bad = false;
      if (threadIdx.x == 0) {
        bad = !waitFor(a_, flag(a_.rank, a_.layout.posted, blockIdx.x, p), step_ + 1, p, kIntraWaitPosted, step_);
        if (!bad && step_ == a_.stepBase) {
          const uint64_t theirs = *static_cast<volatile uint64_t*>(signature(a_.rank, blockIdx.x, p));
          if (theirs != a_.signature) {
            record(a_, kIntraMismatch, p, 0, step_, theirs);
            bad = true;
          }
        }
      }
      failed_ = __syncthreads_or(bad);
    }
    return slot(p, step_);
  }
  __device__ const uint8_t* peerPrevious(int p) const { return slot(p, step_ - 1); }
  __device__ uint8_t* previous() const { return slot(a_.rank, step_ - 1); }

  __device__ void end() {
    if (!failed_) {
      __syncthreads();  // every thread's reads of this step are done
      const int t = static_cast<int>(threadIdx.x);
      if (t < a_.world && t != a_.rank) storeRelease(flag(t, a_.layout.consumed, blockIdx.x, a_.rank), step_ + 1);
    }
    ++step_;
  }

  __device__ const void** sources() { return sources_; }

  __device__ void copy(void* dst, const void* src, size_t n) {
    if (failed_) return;
    size_t lo = 0, hi = 0;
    share(n, &lo, &hi);
    auto* d = static_cast<uint8_t*>(dst) + lo * sizeof(T);
    const auto* s = static_cast<const uint8_t*>(src) + lo * sizeof(T);
    const size_t bytes = (hi - lo) * sizeof(T);
    size_t done = 0;
    if (((reinterpret_cast<uintptr_t>(d) | reinterpret_cast<uintptr_t>(s)) & 15u) == 0) {
      done = bytes / 16 * 16;
      for (size_t i = threadIdx.x; i < bytes / 16; i += blockDim.x)
        reinterpret_cast<uint4*>(d)[i] = __ldcg(reinterpret_cast<const uint4*>(s) + i);
    }
    for (size_t i = done + threadIdx.x; i < bytes; i += blockDim.x) d[i] = s[i];
  }

  // Folds the sources in rank order in the compute type and applies Fin once, as
  // reduceSources does on the CPU: every rank that reduces a slice gets the same bits.
  __device__ void reduce(void* dst, const void* const* srcs, size_t n) {
    if (failed_) return;
    size_t lo = 0, hi = 0;
    share(n, &lo, &hi);
    T* d = static_cast<T*>(dst);
    uintptr_t bits = reinterpret_cast<uintptr_t>(dst);
    for (int p = 0; p < a_.world; ++p) bits |= reinterpret_cast<uintptr_t>(srcs[p]);
    constexpr size_t kN = Vec<T>::kElems;
    using Pack = typename Vec<T>::Pack;
    using C = typename Compute<T>::type;
    if ((bits & 15u) == 0) {  // lo is a multiple of kN (share), so every vector is aligned
      const size_t vecs = (hi - lo) / kN, first = lo / kN;
      for (size_t i = threadIdx.x; i < vecs; i += blockDim.x) {
        Pack in;
        in.v = __ldcg(static_cast<const uint4*>(srcs[0]) + first + i);
        C acc[kN];
        for (size_t j = 0; j < kN; ++j) acc[j] = load(in.e[j]);
        for (int p = 1; p < a_.world; ++p) {
          in.v = __ldcg(static_cast<const uint4*>(srcs[p]) + first + i);
          for (size_t j = 0; j < kN; ++j) acc[j] = SumFn{}(acc[j], load(in.e[j]));
        }
        Pack out;
        for (size_t j = 0; j < kN; ++j) out.e[j] = store<T>(fin_(acc[j]));
        reinterpret_cast<uint4*>(d)[first + i] = out.v;
      }
      lo += vecs * kN;
    }
    for (size_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
      C acc = load(static_cast<const T*>(srcs[0])[i]);
      for (int p = 1; p < a_.world; ++p) acc = SumFn{}(acc, load(static_cast<const T*>(srcs[p])[i]));
      d[i] = store<T>(fin_(acc));
    }
  }

 private:
  __device__ uint8_t* slot(int r, uint64_t step) const {
    return a_.regions[r] + (step % static_cast<uint64_t>(a_.config.depth)) * a_.config.slotBytes;
  }
  __device__ uint64_t* flag(int region, size_t offset, int block, int peer) const {
    return reinterpret_cast<uint64_t*>(a_.regions[region] + offset) + block * kIntraMaxRanks + peer;
  }
  // The signature `peer` left in `region` for this step's slot.
  __device__ uint64_t* signature(int region, int block, int peer) const {
    const uint64_t s = step_ % static_cast<uint64_t>(a_.config.depth);
    return reinterpret_cast<uint64_t*>(a_.regions[region] + a_.layout.signatures) +
           (s * a_.config.blocks + block) * kIntraMaxRanks + peer;
  }
  // This block's share [lo, hi) of a range of n elements: the same on every rank for the
  // same n, in whole 16-byte vectors.
  __device__ void share(size_t n, size_t* lo, size_t* hi) const {
    constexpr size_t kN = Vec<T>::kElems;
    const size_t blocks = static_cast<size_t>(a_.config.blocks);
    const size_t per = ((n + blocks - 1) / blocks + kN - 1) / kN * kN;
    *lo = min(n, blockIdx.x * per);
    *hi = min(n, *lo + per);
  }

  const IntraLaunch& a_;
  Fin fin_;
  uint64_t step_;
  bool failed_ = false;
  const void* sources_[kIntraMaxRanks] = {};
};

template <class T, class Fin>
__global__ void __launch_bounds__(kIntraThreads) intraAllreduce(const __grid_constant__ IntraLaunch a, Fin fin) {
  // After a failure the step counters of the ranks no longer agree: touch nothing (the
  // host fails this launch's work from the record). The abort word may be set already.
  int stop = 0;
  if (threadIdx.x == 0) {
    if (loadRelaxed32(&a.error->claim) != 0) {
      stop = 1;
    } else if (loadRelaxed32(a.abortWord) != 0) {
      record(a, kIntraAborted, -1, 0, a.stepBase);
      stop = 1;
    }
  }
  if (__syncthreads_or(stop)) return;
  DeviceNet<T, Fin> net(a, fin);
  auto* data = static_cast<uint8_t*>(a.data);
  if (a.algo == IntraAlgo::TwoShot) intra::twoShot(net, data, a.count, sizeof(T), Vec<T>::kElems);
  else intra::oneShot(net, data, a.count, sizeof(T));
}

template <class T> int launchAs(const IntraLaunch& a, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(a.config.blocks)), block(static_cast<unsigned>(a.config.threads));
  if (a.factor == 1.0f) intraAllreduce<T, NoScale><<<grid, block, 0, stream>>>(a, NoScale{});
  else intraAllreduce<T, ScaleBy<float>><<<grid, block, 0, stream>>>(a, ScaleBy<float>{a.factor});
  return static_cast<int>(cudaGetLastError());
}

bool servable(const IntraLaunch& a) {
  if (a.algo != IntraAlgo::OneShot && a.algo != IntraAlgo::TwoShot) return false;
  if (a.op != ReduceOp::Sum && a.op != ReduceOp::Avg && a.op != ReduceOp::PreMulSum) return false;
  if (a.world < 2 || a.world > kIntraMaxRanks || a.rank < 0 || a.rank >= a.world) return false;
  if (a.config.blocks < 1 || a.config.threads < a.world || a.config.threads > kIntraThreads ||
      a.config.threads % 32 != 0 || a.config.depth < 3)
    return false;
  if (!a.error || !a.abortWord || (a.count && !a.data)) return false;
  for (int r = 0; r < a.world; ++r)
    if (!a.regions[r]) return false;
  return a.count * elementSize(a.dtype) <= a.config.slotBytes;
}

}  // namespace

int launchIntraAllreduce(const IntraLaunch& args, void* stream) {
  if (!servable(args)) return static_cast<int>(cudaErrorInvalidValue);
  auto s = static_cast<cudaStream_t>(stream);
  switch (args.dtype) {
    case DType::Float32: return launchAs<float>(args, s);
    case DType::Float16: return launchAs<Float16>(args, s);
    case DType::BFloat16: return launchAs<BFloat16>(args, s);
    default: break;
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

}  // namespace commhost::kernels
