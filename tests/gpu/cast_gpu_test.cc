// SPDX-License-Identifier: Apache-2.0
// The cast kernels (commhost/kernels/cast.h) against the CPU conversions (commhost/dtype_storage.h, as
// convertBuffer and the hook SDK's CPU casts use them), bit for bit: every one of the 65536
// f16 and bf16 patterns to f32, and to f16/bf16 every f32 an f16/bf16 value is made of,
// its neighbours one ulp away, the midpoints between adjacent 16-bit values (ties to
// even), specials (zeros, infinities, NaNs with payloads, subnormals, the overflow
// edges) and a million random patterns. Then the hook SDK's castTo/copyCast on CUDA
// tensors (the module it opens). Exits 77 (skipped) without a usable device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <random>
#include <vector>

#include "commhost/dtype_storage.h"
#include "commhost/kernels/cast.h"
#include "commhost/sdk/hook_sdk.h"

namespace commhost::test {
namespace {

using commhost::BFloat16;
using commhost::Float16;
using commhost::storage::bitsFloat;
using commhost::storage::floatBits;

// Copies `in` to the device, runs the kernel, copies the result back.
template <class D, class S> std::vector<D> onDevice(const std::vector<S>& in, DType dst, DType src) {
  void* din = nullptr;
  void* dout = nullptr;
  EXPECT_EQ(cudaMalloc(&din, in.size() * sizeof(S)), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&dout, in.size() * sizeof(D)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(din, in.data(), in.size() * sizeof(S), cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(kernels::launchCast(dout, dst, din, src, static_cast<int64_t>(in.size()), nullptr), 0);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<D> out(in.size());
  EXPECT_EQ(cudaMemcpy(out.data(), dout, out.size() * sizeof(D), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(din);
  cudaFree(dout);
  return out;
}

// Every 16-bit pattern, as a storage type's bits.
template <class H> std::vector<H> allPatterns() {
  std::vector<H> out(65536);
  for (uint32_t b = 0; b < 65536; ++b) out[b].bits = static_cast<uint16_t>(b);
  return out;
}

// f32 inputs for the narrowing casts: each 16-bit value's f32 (through `widen`), one f32
// ulp either side, the midpoint to the next pattern, specials, random patterns.
template <class H> std::vector<float> spread() {
  std::vector<float> out;
  for (const H& h : allPatterns<H>()) {
    const uint32_t u = floatBits(h.toFloat());
    out.push_back(bitsFloat(u));
    out.push_back(bitsFloat(u + 1));
    out.push_back(bitsFloat(u - 1));
    H next;
    next.bits = static_cast<uint16_t>(h.bits + 1);
    out.push_back((h.toFloat() + next.toFloat()) / 2);  // a tie (exact in f32): rounds to even
  }
  for (uint32_t u : {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u, 0x7f800001u,
                     0xff800001u, 0x7fbfffffu, 0x7fffffffu, 0x7f80e000u, 0x00000001u, 0x80000001u, 0x007fffffu,
                     0x00800000u, 0x7f7fffffu, 0xff7fffffu, 0x477fe000u, 0x477ff000u, 0x477fefffu, 0x477fffffu,
                     0x33800000u, 0x33000000u, 0x33000001u, 0x387fc000u, 0x38800000u, 0x3f800000u})
    out.push_back(bitsFloat(u));
  std::mt19937 rng(17);
  for (int i = 0; i < 1000000; ++i) out.push_back(bitsFloat(static_cast<uint32_t>(rng())));
  return out;
}

TEST(CastKernels, SixteenBitToF32IsBitExactForEveryPattern) {
  const auto f16 = allPatterns<Float16>();
  const auto bf16 = allPatterns<BFloat16>();
  const auto fromF16 = onDevice<float>(f16, DType::Float32, DType::Float16);
  const auto fromBf16 = onDevice<float>(bf16, DType::Float32, DType::BFloat16);
  int wrong = 0;
  for (uint32_t b = 0; b < 65536 && wrong < 10; ++b) {
    if (floatBits(fromF16[b]) != floatBits(f16[b].toFloat())) {
      ADD_FAILURE() << "f16 0x" << std::hex << b << ": device 0x" << floatBits(fromF16[b]) << ", cpu 0x"
                    << floatBits(f16[b].toFloat());
      ++wrong;
    }
    if (floatBits(fromBf16[b]) != floatBits(bf16[b].toFloat())) {
      ADD_FAILURE() << "bf16 0x" << std::hex << b << ": device 0x" << floatBits(fromBf16[b]) << ", cpu 0x"
                    << floatBits(bf16[b].toFloat());
      ++wrong;
    }
  }
}

template <class H> void checkNarrowing(DType dtype, const char* name) {
  const std::vector<float> in = spread<H>();
  const auto got = onDevice<H>(in, dtype, DType::Float32);
  int wrong = 0;
  for (size_t i = 0; i < in.size() && wrong < 10; ++i) {
    const uint16_t want = H::fromFloat(in[i]).bits;
    if (got[i].bits != want) {
      ADD_FAILURE() << "f32 0x" << std::hex << floatBits(in[i]) << " (" << in[i] << ") to " << name << ": device 0x"
                    << got[i].bits << ", cpu 0x" << want;
      ++wrong;
    }
  }
  std::printf("%zu f32 values to %s: %s\n", in.size(), name, wrong ? "MISMATCHES" : "all bit-exact");
}

TEST(CastKernels, F32ToF16IsBitExactOnASpreadOfFloats) { checkNarrowing<Float16>(DType::Float16, "f16"); }
TEST(CastKernels, F32ToBf16IsBitExactOnASpreadOfFloats) { checkNarrowing<BFloat16>(DType::BFloat16, "bf16"); }

TEST(CastKernels, PairsTheKernelsDoNotCastAreRefused) {
  EXPECT_FALSE(canCastOnDevice(DType::Float64, DType::Float32));
  EXPECT_FALSE(canCastOnDevice(DType::Float16, DType::BFloat16));
  EXPECT_EQ(kernels::launchCast(nullptr, DType::Float64, nullptr, DType::Float32, 4, nullptr),
            static_cast<int>(cudaErrorInvalidValue));
  EXPECT_EQ(kernels::launchCast(nullptr, DType::Float16, nullptr, DType::Float32, 0, nullptr), 0);
}

// The hook SDK's casts of CUDA tensors (through libcommhost_cuda_casts.so) agree with its
// CPU casts, both ways.
TEST(CastKernels, HookSdkCastsOfCudaTensorsMatchTheCpu) {
  constexpr int64_t n = 4099;  // not a multiple of the block size
  Tensor cpu = Tensor::empty({n}, DType::Float32);
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 1000.0f);
  for (int64_t i = 0; i < n; ++i) cpu.data_as<float>()[i] = dist(rng);
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, cpu.nbytes()), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(p, cpu.data(), cpu.nbytes(), cudaMemcpyHostToDevice), cudaSuccess);
  const Tensor dev = Tensor::fromBlob(p, {n}, DType::Float32, Device::cuda(0),
                                      std::shared_ptr<void>(p, [](void* q) { cudaFree(q); }));
  for (DType wire : {DType::Float16, DType::BFloat16}) {
    const Tensor narrowCpu = hooks::castTo(cpu, wire);
    const Tensor narrowDev = hooks::castTo(dev, wire);
    ASSERT_EQ(narrowDev.device(), Device::cuda(0));
    std::vector<uint16_t> got(n);
    ASSERT_EQ(cudaMemcpy(got.data(), narrowDev.data(), n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(got[i], narrowCpu.data_as<uint16_t>()[i]) << dtypeName(wire) << " element " << i;
    hooks::copyCast(dev, narrowDev);  // back into the f32 tensor
    const Tensor wideCpu = hooks::castTo(narrowCpu, DType::Float32);
    std::vector<float> back(n);
    ASSERT_EQ(cudaMemcpy(back.data(), dev.data(), n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(floatBits(back[i]), floatBits(wideCpu.data_as<float>()[i])) << dtypeName(wire) << " element " << i;
    ASSERT_EQ(cudaMemcpy(p, cpu.data(), cpu.nbytes(), cudaMemcpyHostToDevice), cudaSuccess);
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
  cudaSetDevice(0);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
