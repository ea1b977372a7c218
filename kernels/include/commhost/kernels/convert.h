// SPDX-License-Identifier: Apache-2.0
// Element-wise dtype conversion (with an optional scale) between any two commhost dtypes,
// through each storage type's compute type: f16/bf16 round to nearest even (half.h).
// Header only, so the host library (the comm-hook SDK) uses it without linking kernels.
#pragma once

#include <cstddef>
#include <type_traits>

#include "commhost/kernels/reduce.h"

namespace commhost::kernels {

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

// convert() for dtypes known at run time. dst and src must not overlap unless they are
// the same array of the same dtype (an in-place scale).
inline void convertBuffer(void* dst, DType dstType, const void* src, DType srcType, size_t n, double factor = 1.0) {
  withStorageType(dstType, [&](auto* d) {
    using D = std::remove_pointer_t<decltype(d)>;
    withStorageType(srcType, [&](auto* s) {
      using S = std::remove_pointer_t<decltype(s)>;
      convert(static_cast<D*>(dst), static_cast<const S*>(src), n, factor);
    });
  });
}

}  // namespace commhost::kernels
