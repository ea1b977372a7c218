// SPDX-License-Identifier: Apache-2.0
// Verifiable data for backend tests: every rank fills its tensors from a formula each
// rank can evaluate for every other, and computes the expected result of every dtype x
// reduce op itself (small values, so sums and products stay exact in every dtype).
#pragma once

#include <algorithm>
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "commhost/commhost.h"
#include "commhost/kernels/reduce.h"

namespace commhost::test {

// Rank r's element i: small values so sums and products stay exact in every dtype.
inline int64_t source(DType dtype, int rank, int64_t i) {
  return dtype == DType::Bool ? (rank + i) % 2 : 1 + (rank + i) % 3;
}

inline double load(const Tensor& t, int64_t i) { return kernels::getElement(t.data(), t.dtype(), i); }
inline void storeValue(Tensor& t, int64_t i, double v) { kernels::setElement(t.data(), t.dtype(), i, v); }

inline Tensor sourceTensor(DType dtype, int rank, int64_t n) {
  Tensor t = Tensor::empty({n}, dtype);
  for (int64_t i = 0; i < n; ++i) storeValue(t, i, static_cast<double>(source(dtype, rank, i)));
  return t;
}

inline bool valid(DType dtype, ReduceOp::Kind op) {
  const bool floating = isFloating(dtype);
  const ReduceOp r(op);
  if (r.isBitwise()) return !floating;
  if (op == ReduceOp::Avg || op == ReduceOp::PreMulSum) return floating;
  return true;
}

inline double expected(DType dtype, ReduceOp::Kind op, int world, int64_t i) {
  int64_t acc = source(dtype, 0, i);
  double sum = static_cast<double>(acc);
  for (int r = 1; r < world; ++r) {
    const int64_t v = source(dtype, r, i);
    sum += static_cast<double>(v);
    switch (op) {
      case ReduceOp::Product: acc *= v; break;
      case ReduceOp::Min: acc = std::min(acc, v); break;
      case ReduceOp::Max: acc = std::max(acc, v); break;
      case ReduceOp::BAnd: acc &= v; break;
      case ReduceOp::BOr: acc |= v; break;
      case ReduceOp::BXor: acc ^= v; break;
      default: break;
    }
  }
  if (dtype == DType::Bool) {  // sum and max of bools are or; product and min are and
    if (op == ReduceOp::Sum) return sum > 0 ? 1 : 0;
  }
  switch (op) {
    case ReduceOp::Sum: return sum;
    case ReduceOp::Avg: return sum / world;
    case ReduceOp::PreMulSum: return sum * 0.5;
    default: break;
  }
  if (dtype == DType::Int8) return static_cast<double>(static_cast<int8_t>(acc));
  if (dtype == DType::UInt8) return static_cast<double>(static_cast<uint8_t>(acc));
  return static_cast<double>(acc);
}

inline double tolerance(DType dtype) { return dtype == DType::Float16 || dtype == DType::BFloat16 ? 1e-2 : 1e-6; }

// Element i of t equals `want` within the dtype's tolerance (relative above 1).
inline void expectNear(const Tensor& t, int64_t i, double want, const std::string& what) {
  ASSERT_NEAR(load(t, i), want, tolerance(t.dtype()) * std::max(1.0, std::fabs(want))) << what << " i " << i;
}

// `count` elements of `dtype`, every one `value` (e.g. f16 values whose sum overflows).
inline Tensor constantTensor(DType dtype, int64_t count, double value) {
  Tensor t = Tensor::empty({count}, dtype);
  for (int64_t i = 0; i < count; ++i) storeValue(t, i, value);
  return t;
}

// The data-movement tests' f32 data: rank r's element i is r * 10000 + i, exact in f32.
inline float patternValue(int rank, int64_t i) { return static_cast<float>(rank * 10000 + i); }
inline Tensor patternTensor(int rank, int64_t count) {
  Tensor t = Tensor::empty({count}, DType::Float32);
  for (int64_t i = 0; i < count; ++i) t.data_as<float>()[i] = patternValue(rank, i);
  return t;
}
// Elements [from, from + count) of t are exactly rank `rank`'s pattern.
inline void expectPattern(const Tensor& t, int rank, int64_t from, int64_t count, const std::string& what) {
  for (int64_t i = 0; i < count; ++i)
    ASSERT_EQ(t.data_as<float>()[from + i], patternValue(rank, i)) << what << " i " << i;
}

}  // namespace commhost::test
