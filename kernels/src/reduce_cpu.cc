// SPDX-License-Identifier: Apache-2.0
// CPU instantiation of the reduction functors: one loop per (dtype, op), compiled with
// -O3 so the native-type loops vectorise (see kernels/README.md for how to check).
#include <type_traits>

#include "commhost/kernels/reduce.h"

namespace commhost::kernels {
namespace {

template <class T>
constexpr bool kIsFloat = std::is_floating_point_v<T> || std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;

// Calls body(fn) with the functor of `op` for storage type T (Avg and PreMulSum sum).
template <class T, class Body> void withFn(ReduceOp::Kind op, Body&& body) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
    case ReduceOp::PreMulSum: return body(SumFn{});
    case ReduceOp::Product: return body(ProdFn{});
    case ReduceOp::Min: return body(MinFn{});
    case ReduceOp::Max: return body(MaxFn{});
    case ReduceOp::BAnd:
    case ReduceOp::BOr:
    case ReduceOp::BXor:
      if constexpr (kIsFloat<T>) {
        throw InvalidArgument(std::string("bitwise reduce op ") + reduceOpName(op) + " on floating-point data");
      } else {
        if (op == ReduceOp::BAnd) return body(BAndFn{});
        if (op == ReduceOp::BOr) return body(BOrFn{});
        return body(BXorFn{});
      }
  }
}

[[noreturn]] void cannotScale(DType dtype, double factor) {
  throw InvalidArgument(std::string("cannot scale ") + dtypeName(dtype) + " data by " + std::to_string(factor) +
                        "; avg and premul_sum need a floating-point dtype");
}

// Bool sum and max are or; product and min are and.
ReduceOp::Kind boolOp(DType dtype, ReduceOp::Kind op) {
  if (dtype == DType::Bool && (op == ReduceOp::Sum || op == ReduceOp::Max)) return ReduceOp::BOr;
  if (dtype == DType::Bool && (op == ReduceOp::Product || op == ReduceOp::Min)) return ReduceOp::BAnd;
  return op;
}

}  // namespace

void reduceBuffer(void* dst, const void* src, size_t n, DType dtype, ReduceOp::Kind op) {
  withStorageType(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    withFn<T>(boolOp(dtype, op), [&](auto fn) { reduceInto(static_cast<T*>(dst), static_cast<const T*>(src), n, fn); });
  });
}

void reduceSourcesBuffer(void* dst, const void* const* srcs, int count, size_t n, DType dtype, ReduceOp::Kind op,
                         double factor) {
  // The common case straight to its loop: the dispatch below is ~80 instructions, more
  // than an 8 B op's whole sum (the shm line path reduces here once per op).
  if (dtype == DType::Float32 && op == ReduceOp::Sum && factor == 1.0)
    return reduceSources(static_cast<float*>(dst), reinterpret_cast<const float* const*>(srcs), count, n, SumFn{});
  withStorageType(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    auto* out = static_cast<T*>(dst);
    auto* in = reinterpret_cast<const T* const*>(srcs);
    if constexpr (kIsFloat<T>) {
      if (factor != 1.0) {
        using C = typename Compute<T>::type;
        const ScaleBy<C> fin{static_cast<C>(factor)};
        return withFn<T>(boolOp(dtype, op), [&](auto fn) { reduceSources(out, in, count, n, fn, fin); });
      }
    } else if (factor != 1.0) {
      cannotScale(dtype, factor);
    }
    withFn<T>(boolOp(dtype, op), [&](auto fn) { reduceSources(out, in, count, n, fn); });
  });
}

void scaleBuffer(void* dst, size_t n, DType dtype, double factor) {
  if (factor == 1.0) return;
  withStorageType(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    if constexpr (kIsFloat<T>) {
      scale(static_cast<T*>(dst), n, factor);
    } else {
      cannotScale(dtype, factor);
    }
  });
}

double getElement(const void* data, DType dtype, int64_t i) {
  return withStorageType(dtype, [&](auto* tag) -> double {
    using T = std::remove_pointer_t<decltype(tag)>;
    return static_cast<double>(load(static_cast<const T*>(data)[i]));
  });
}

void setElement(void* data, DType dtype, int64_t i, double value) {
  withStorageType(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    static_cast<T*>(data)[i] = store<T>(static_cast<typename Compute<T>::type>(value));
  });
}

}  // namespace commhost::kernels
