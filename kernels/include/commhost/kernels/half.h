// SPDX-License-Identifier: Apache-2.0
// 16-bit floating-point storage types (IEEE half and bfloat16) with float conversion.
// Arithmetic happens in float: load, compute, round back (round to nearest even).
// Usable from CUDA device code too.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define COMMHOST_HD __host__ __device__
#else
#define COMMHOST_HD
#endif

namespace commhost::kernels {

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

struct BFloat16 {
  uint16_t bits;
  COMMHOST_HD static BFloat16 fromFloat(float f) {
    uint32_t u = floatBits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return {static_cast<uint16_t>((u >> 16) | 0x40)};  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return {static_cast<uint16_t>(u >> 16)};
  }
  COMMHOST_HD float toFloat() const { return bitsFloat(static_cast<uint32_t>(bits) << 16); }
};

struct Float16 {
  uint16_t bits;
  COMMHOST_HD static Float16 fromFloat(float f) {
    const uint32_t u = floatBits(f);
    const uint32_t sign = (u >> 16) & 0x8000u;
    const uint32_t absu = u & 0x7fffffffu;
    if (absu > 0x7f800000u) return {static_cast<uint16_t>(sign | 0x7e00u)};   // NaN
    if (absu >= 0x477ff000u) return {static_cast<uint16_t>(sign | 0x7c00u)};  // overflow -> inf
    if (absu < 0x38800000u) {                                                 // subnormal or zero
      // Add 0.5 so the float adder rounds the value at half's subnormal spacing (2^-24).
      const float magic = bitsFloat(0x3f000000u);  // 0.5
      const float shifted = bitsFloat(absu) + magic;
      return {static_cast<uint16_t>(sign | (floatBits(shifted) - floatBits(magic)))};
    }
    uint32_t m = absu + 0xc8000fffu + ((absu >> 13) & 1u);  // rebias exponent, round to nearest even
    return {static_cast<uint16_t>(sign | (m >> 13))};
  }
  COMMHOST_HD float toFloat() const {
    const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
    const uint32_t exp = (bits >> 10) & 0x1fu;
    const uint32_t mant = bits & 0x3ffu;
    if (exp == 0x1f) return bitsFloat(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) {
      const float v = static_cast<float>(mant) * (1.0f / 16777216.0f);  // mant * 2^-24
      return sign ? -v : v;
    }
    return bitsFloat(sign | ((exp + 112) << 23) | (mant << 13));
  }
};

}  // namespace commhost::kernels
