// SPDX-License-Identifier: Apache-2.0
// The intra-node one-shot / two-shot allreduce kernels: every thread of the grid runs
// intra::allreduceBody (intra_device_net.h: the device Net under intra::oneShot /
// intra::twoShot) with CudaEnv below. The layout, the flags and the ordering argument
// are in intra_allreduce.h.
#include <cuda_runtime.h>

#include "commhost/kernels/intra_allreduce.h"
#include "commhost/kernels/intra_device_net.h"

namespace commhost::kernels {
namespace {

// One thread of the grid. Flags are system scope: their writer is another GPU (stores
// over NVLink into this GPU's memory), and gpu scope would not order its data writes
// before the flag. Data is read with ld.global.cg (L2, not L1): the acquire and barrier
// already order it, this keeps other GPUs' data from lingering in L1 between steps.
struct CudaEnv {
  __device__ unsigned tid() const { return threadIdx.x; }
  __device__ unsigned threads() const { return blockDim.x; }
  __device__ unsigned block() const { return blockIdx.x; }
  __device__ bool syncOr(bool v) { return __syncthreads_or(v) != 0; }
  __device__ uint64_t loadAcquire(const uint64_t* p) {
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
  }
  __device__ uint64_t loadRelaxed(const uint64_t* p) {
    uint64_t v;
    asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
  }
  __device__ uint32_t loadRelaxed32(const uint32_t* p) {
    uint32_t v;
    asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
  }
  __device__ void storeRelease(uint64_t* p, uint64_t v) {
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  }
  __device__ void storeRelease32(uint32_t* p, uint32_t v) {
    asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
  }
  // The claim word is this GPU's own memory and only its blocks race for it.
  __device__ bool claim(uint32_t* p) { return atomicCAS(p, 0u, 1u) == 0u; }
  __device__ void fenceSystem() { __threadfence_system(); }
  __device__ uint64_t nowNs() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
  }
  __device__ intra::Vec16 load16(const void* p) {
    const uint4 v = __ldcg(static_cast<const uint4*>(p));
    return {{v.x, v.y, v.z, v.w}};
  }
  __device__ void store16(void* p, const intra::Vec16& v) {
    *static_cast<uint4*>(p) = make_uint4(v.w[0], v.w[1], v.w[2], v.w[3]);
  }
};

template <class T, class Fin>
__global__ void __launch_bounds__(kIntraThreads) intraAllreduce(const __grid_constant__ IntraLaunch a, Fin fin) {
  CudaEnv env;
  intra::allreduceBody<T>(env, a, fin);
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
