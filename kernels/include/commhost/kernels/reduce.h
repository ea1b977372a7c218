// SPDX-License-Identifier: Apache-2.0
// Element-wise reduction and scaling over every commhost dtype, for CPU backends.
// Plain loops over contiguous arrays: the compiler vectorises them at -O2/-O3 for the
// native types; f16/bf16 go through float. The functors are usable from CUDA code.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "commhost/dtype_storage.h"
#include "commhost/errors.h"
#include "commhost/types.h"

namespace commhost::kernels {

using storage::Compute;
using storage::load;
using storage::store;

// Integer sums and products wrap around, as the peers' (two's complement) do. Signed
// overflow is undefined, so a signed type's operation is done in an unsigned type at
// least as wide as unsigned int (narrower ones would be promoted to int and overflow it).
template <class C> struct Wrapping {
  using type = std::conditional_t<(sizeof(C) < sizeof(unsigned)), unsigned, std::make_unsigned_t<C>>;
};
template <class C> constexpr bool kSignedInt = std::is_integral_v<C>&& std::is_signed_v<C>;

struct SumFn {
  template <class C> COMMHOST_HD C operator()(C a, C b) const {
    if constexpr (kSignedInt<C>) {
      using U = typename Wrapping<C>::type;
      return static_cast<C>(static_cast<U>(a) + static_cast<U>(b));
    } else {
      return a + b;
    }
  }
};
struct ProdFn {
  template <class C> COMMHOST_HD C operator()(C a, C b) const {
    if constexpr (kSignedInt<C>) {
      using U = typename Wrapping<C>::type;
      return static_cast<C>(static_cast<U>(a) * static_cast<U>(b));
    } else if constexpr (std::is_integral_v<C> && sizeof(C) < sizeof(unsigned)) {
      return static_cast<C>(static_cast<unsigned>(a) * static_cast<unsigned>(b));  // u8 * u8 is int, may overflow
    } else {
      return a * b;
    }
  }
};
struct MinFn {
  template <class C> COMMHOST_HD C operator()(C a, C b) const { return b < a ? b : a; }
};
struct MaxFn {
  template <class C> COMMHOST_HD C operator()(C a, C b) const { return a < b ? b : a; }
};
struct BAndFn {
  template <class C> COMMHOST_HD C operator()(C a, C b) const { return a & b; }
};
struct BOrFn {
  template <class C> COMMHOST_HD C operator()(C a, C b) const { return a | b; }
};
struct BXorFn {
  template <class C> COMMHOST_HD C operator()(C a, C b) const { return a ^ b; }
};

// dst[i] = fn(dst[i], src[i])
template <class T, class Fn> void reduceInto(T* __restrict dst, const T* __restrict src, size_t n, Fn fn) {
  for (size_t i = 0; i < n; ++i) dst[i] = store<T>(fn(load(dst[i]), load(src[i])));
}

// dst[i] = fn(srcs[0][i], srcs[1][i], ..., srcs[count-1][i]), folded in source order and
// accumulated in the compute type (f16/bf16 round once, at the end). dst must not alias
// a source. Up to 4 sources are fused into one pass; more go in blocks through a
// compute-type accumulator, so every loop stays a plain vectorisable one.
//
// Fin is applied to each folded value in the compute type before the store: NoScale, or
// ScaleBy for Avg's 1/n and PreMulSum's factor, so a 16-bit result that fits is never
// lost to a 16-bit sum that does not (four f16 30000s average to 30000, not inf).
struct NoScale {
  template <class C> COMMHOST_HD C operator()(C v) const { return v; }
};
template <class C> struct ScaleBy {
  C factor;
  COMMHOST_HD C operator()(C v) const { return v * factor; }
};

template <class T, class Fn, class Fin = NoScale>
void reduceSources(T* __restrict dst, const T* const* srcs, int count, size_t n, Fn fn, Fin fin = Fin{}) {
  using C = typename Compute<T>::type;
  const T* __restrict a = srcs[0];
  if (count == 1) {
    for (size_t i = 0; i < n; ++i) dst[i] = store<T>(fin(load(a[i])));
    return;
  }
  const T* __restrict b = srcs[1];
  if (count == 2) {
    for (size_t i = 0; i < n; ++i) dst[i] = store<T>(fin(fn(load(a[i]), load(b[i]))));
    return;
  }
  const T* __restrict c = srcs[2];
  if (count == 3) {
    for (size_t i = 0; i < n; ++i) dst[i] = store<T>(fin(fn(fn(load(a[i]), load(b[i])), load(c[i]))));
    return;
  }
  const T* __restrict d = srcs[3];
  if (count == 4) {
    for (size_t i = 0; i < n; ++i) dst[i] = store<T>(fin(fn(fn(fn(load(a[i]), load(b[i])), load(c[i])), load(d[i]))));
    return;
  }
  constexpr size_t kBlock = 512;
  C acc[kBlock];
  for (size_t at = 0; at < n; at += kBlock) {
    const size_t m = n - at < kBlock ? n - at : kBlock;
    for (size_t i = 0; i < m; ++i) acc[i] = load(a[at + i]);
    for (int s = 1; s < count; ++s) {
      const T* __restrict src = srcs[s] + at;
      for (size_t i = 0; i < m; ++i) acc[i] = fn(acc[i], load(src[i]));
    }
    for (size_t i = 0; i < m; ++i) dst[at + i] = store<T>(fin(acc[i]));
  }
}

// dst[i] *= factor (Avg's divide and PreMulSum's scale); floating types only.
template <class T> void scale(T* dst, size_t n, double factor) {
  using C = typename Compute<T>::type;
  const C f = static_cast<C>(factor);
  for (size_t i = 0; i < n; ++i) dst[i] = store<T>(static_cast<C>(load(dst[i]) * f));
}

// Element i of an array of `dtype`, converted to or from double: for building and
// checking test and benchmark data, not for hot loops.
double getElement(const void* data, DType dtype, int64_t i);
void setElement(void* data, DType dtype, int64_t i, double value);

// dst = op(dst, src) over n elements of `dtype`. Avg and PreMulSum accumulate as Sum;
// the caller applies the final scale once (scaleFor below). Bitwise ops on floating
// types throw InvalidArgument (the ProcessGroup rejects them earlier).
void reduceBuffer(void* dst, const void* src, size_t n, DType dtype, ReduceOp::Kind op);
// dst = op(srcs[0], ..., srcs[count-1]) * factor over n elements of `dtype`, folded in
// source order (so every rank that reduces the same sources in the same order gets the
// same bits). Avg and PreMulSum sum; pass their finalScale as `factor`, which is applied
// in the compute type before the one store (no 16-bit overflow of a sum whose scaled
// result fits, and no second pass). dst must not alias a source.
void reduceSourcesBuffer(void* dst, const void* const* srcs, int count, size_t n, DType dtype, ReduceOp::Kind op,
                         double factor = 1.0);
// Scales n elements of `dtype` in place by `factor` (no-op for factor 1).
void scaleBuffer(void* dst, size_t n, DType dtype, double factor);

// The factor to apply after summing `worldSize` contributions: Avg 1/worldSize,
// PreMulSum `factor` (scaling the sum equals summing the scaled inputs), else 1.
inline double finalScale(const ReduceOp& op, int worldSize) {
  if (op.kind == ReduceOp::Avg) return 1.0 / worldSize;
  if (op.kind == ReduceOp::PreMulSum) return op.factor;
  return 1.0;
}

// Where a backend that folds pairwise (dst = op(dst, src), partial results stored in
// the storage type, as Gloo's ring does) applies Avg's and PreMulSum's factor. For f16
// and bf16 a partial sum can overflow although the scaled result fits, so each input is
// scaled first (as NCCL's PreMulSum does) and nothing after; other dtypes keep the one
// rounding of scaling the sum at the end.
struct ScaleSplit {
  double input = 1.0;   // scaleBuffer the contribution by this before the reduction
  double output = 1.0;  // scaleBuffer the result by this after it
};
inline ScaleSplit pairwiseScale(const ReduceOp& op, int worldSize, DType dtype) {
  const double factor = finalScale(op, worldSize);
  if (dtype == DType::Float16 || dtype == DType::BFloat16) return {factor, 1.0};
  return {1.0, factor};
}

}  // namespace commhost::kernels
