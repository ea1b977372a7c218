// SPDX-License-Identifier: Apache-2.0
// How each commhost dtype is stored and converted, part of the vocabulary every part
// shares: the 16-bit floating-point storage types (IEEE half and bfloat16, arithmetic in
// float, rounding to nearest even), the storage type of a dtype known at run time
// (withStorageType), element conversion between any two dtypes (convertBuffer), and the
// pairs the device cast kernels convert. Header only and usable from CUDA device code.
//
// It sits below kernels/ (whose reductions and casts use it) so that libcommhost itself
// (the comm-hook SDK's casts, shadow comparisons) needs no kernels header: kernels build
// on host's public headers, never the other way (libcommhost's target has no kernels
// include path, so the build refuses a kernels header in host/src).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "commhost/errors.h"
#include "commhost/types.h"

#if defined(__CUDACC__)
#define COMMHOST_HD __host__ __device__
#else
#define COMMHOST_HD
#endif

namespace commhost {

// The helpers below the storage types (bit casts, the compute type, load/store, convert)
// live in commhost::storage, so their short names stay out of applications' way.
namespace storage {
COMMHOST_HD inline uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
COMMHOST_HD inline float bitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
}  // namespace storage

struct BFloat16 {
  uint16_t bits;
  COMMHOST_HD static BFloat16 fromFloat(float f) {
    uint32_t u = storage::floatBits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return {static_cast<uint16_t>((u >> 16) | 0x40)};  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return {static_cast<uint16_t>(u >> 16)};
  }
  COMMHOST_HD float toFloat() const { return storage::bitsFloat(static_cast<uint32_t>(bits) << 16); }
};

struct Float16 {
  uint16_t bits;
  COMMHOST_HD static Float16 fromFloat(float f) {
    const uint32_t u = storage::floatBits(f);
    const uint32_t sign = (u >> 16) & 0x8000u;
    const uint32_t absu = u & 0x7fffffffu;
    if (absu > 0x7f800000u) return {static_cast<uint16_t>(sign | 0x7e00u)};   // NaN
    if (absu >= 0x477ff000u) return {static_cast<uint16_t>(sign | 0x7c00u)};  // overflow -> inf
    if (absu < 0x38800000u) {                                                 // subnormal or zero
      // Add 0.5 so the float adder rounds the value at half's subnormal spacing (2^-24).
      const float magic = storage::bitsFloat(0x3f000000u);  // 0.5
      const float shifted = storage::bitsFloat(absu) + magic;
      return {static_cast<uint16_t>(sign | (storage::floatBits(shifted) - storage::floatBits(magic)))};
    }
    uint32_t m = absu + 0xc8000fffu + ((absu >> 13) & 1u);  // rebias exponent, round to nearest even
    return {static_cast<uint16_t>(sign | (m >> 13))};
  }
  COMMHOST_HD float toFloat() const {
    const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
    const uint32_t exp = (bits >> 10) & 0x1fu;
    const uint32_t mant = bits & 0x3ffu;
    if (exp == 0x1f) return storage::bitsFloat(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) {
      const float v = static_cast<float>(mant) * (1.0f / 16777216.0f);  // mant * 2^-24
      return sign ? -v : v;
    }
    return storage::bitsFloat(sign | ((exp + 112) << 23) | (mant << 13));
  }
};

namespace storage {
// Compute type for a storage type: float for the 16-bit floats, itself otherwise.
template <class T> struct Compute { using type = T; };
template <> struct Compute<Float16> { using type = float; };
template <> struct Compute<BFloat16> { using type = float; };

template <class T> COMMHOST_HD inline typename Compute<T>::type load(T v) { return v; }
COMMHOST_HD inline float load(Float16 v) { return v.toFloat(); }
COMMHOST_HD inline float load(BFloat16 v) { return v.toFloat(); }
template <class T, class C> COMMHOST_HD inline T store(C v) { return static_cast<T>(v); }
template <> COMMHOST_HD inline Float16 store<Float16, float>(float v) { return Float16::fromFloat(v); }
template <> COMMHOST_HD inline BFloat16 store<BFloat16, float>(float v) { return BFloat16::fromFloat(v); }

// dst[i] = src[i] * factor, computed in double for the 64-bit types and in float (or the
// integer type) otherwise; integers are truncated, as a cast truncates.
template <class D, class S> void convert(D* dst, const S* src, size_t n, double factor) {
  using C = decltype(load(src[0]) + load(dst[0]));
  if (factor == 1.0) {
    for (size_t i = 0; i < n; ++i) dst[i] = store<D>(static_cast<typename Compute<D>::type>(load(src[i])));
    return;
  }
  const C f = static_cast<C>(factor);
  for (size_t i = 0; i < n; ++i)
    dst[i] = store<D>(static_cast<typename Compute<D>::type>(static_cast<C>(load(src[i])) * f));
}
}  // namespace storage

// Calls fn(T*) with the storage type of `dtype` (bool as uint8_t).
template <class F> decltype(auto) withStorageType(DType dtype, F&& fn) {
  switch (dtype) {
    case DType::Bool:
    case DType::UInt8: return fn(static_cast<uint8_t*>(nullptr));
    case DType::Int8: return fn(static_cast<int8_t*>(nullptr));
    case DType::Int32: return fn(static_cast<int32_t*>(nullptr));
    case DType::Int64: return fn(static_cast<int64_t*>(nullptr));
    case DType::Float16: return fn(static_cast<Float16*>(nullptr));
    case DType::BFloat16: return fn(static_cast<BFloat16*>(nullptr));
    case DType::Float32: return fn(static_cast<float*>(nullptr));
    case DType::Float64: return fn(static_cast<double*>(nullptr));
  }
  throw InvalidArgument("unknown dtype");
}

// convert() for dtypes known at run time. dst and src must not overlap unless they are
// the same array of the same dtype (an in-place scale).
inline void convertBuffer(void* dst, DType dstType, const void* src, DType srcType, size_t n, double factor = 1.0) {
  withStorageType(dstType, [&](auto* d) {
    using D = std::remove_pointer_t<decltype(d)>;
    withStorageType(srcType, [&](auto* s) {
      using S = std::remove_pointer_t<decltype(s)>;
      storage::convert(static_cast<D*>(dst), static_cast<const S*>(src), n, factor);
    });
  });
}

// The pairs the device cast kernels (kernels/cast.h) convert: f32 -> f16, f32 -> bf16, f16 -> f32, bf16 -> f32.
constexpr bool canCastOnDevice(DType dst, DType src) {
  const bool dstHalf = dst == DType::Float16 || dst == DType::BFloat16;
  const bool srcHalf = src == DType::Float16 || src == DType::BFloat16;
  return (src == DType::Float32 && dstHalf) || (srcHalf && dst == DType::Float32);
}

}  // namespace commhost
