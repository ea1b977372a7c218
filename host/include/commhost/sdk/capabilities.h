// SPDX-License-Identifier: Apache-2.0
// Capabilities: what a backend can do, declared up front in its plugin descriptor.
// The dispatcher checks routes against it when the config loads, and the ProcessGroup
// checks dtype and reduce op against it before each call; nothing is discovered by
// catching "not supported" errors.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "commhost/export.h"
#include "commhost/types.h"

namespace commhost {

// What a backend can serve beyond single ops, each checked by the host (ABI 2 removed
// Abort, AnySource and Coalescing: nothing could check the first and last, and
// recv_any_source is an op of the manifest, which routes are checked against).
enum class Feature : uint8_t {
  Split,         // serves subgroups (new_group, split); checked when one is created
  MultiProcess,  // ranks may be separate processes; checked by init() when WORLD_SIZE > 1
  MultiHost,     // ranks may be on separate hosts; checked by init() when LOCAL_WORLD_SIZE < WORLD_SIZE
};
constexpr int kNumFeatures = 3;
COMMHOST_API const char* featureName(Feature f);

// A set of enum values as a bitmask; constexpr so manifests can be compile-time constants.
template <class E> class EnumSet {
 public:
  constexpr EnumSet() = default;
  constexpr EnumSet(std::initializer_list<E> values) {
    for (E v : values) bits_ |= bit(v);
  }
  static constexpr EnumSet all(int count) {
    EnumSet s;
    s.bits_ = count >= 64 ? ~0ull : ((1ull << count) - 1);
    return s;
  }
  constexpr bool has(E v) const { return (bits_ & bit(v)) != 0; }
  constexpr EnumSet& add(E v) {
    bits_ |= bit(v);
    return *this;
  }
  constexpr EnumSet& remove(E v) {
    bits_ &= ~bit(v);
    return *this;
  }
  constexpr bool empty() const { return bits_ == 0; }
  constexpr uint64_t bits() const { return bits_; }

 private:
  static constexpr uint64_t bit(E v) { return 1ull << static_cast<unsigned>(v); }
  uint64_t bits_ = 0;
};

struct Capabilities {
  EnumSet<OpType> ops;
  EnumSet<DType> dtypes;
  EnumSet<ReduceOp::Kind> reduceOps;
  EnumSet<DeviceType> devices;
  EnumSet<Feature> features;

  static constexpr EnumSet<OpType> allOps() { return EnumSet<OpType>::all(kNumOpTypes); }
  static constexpr EnumSet<DType> allDTypes() { return EnumSet<DType>::all(kNumDTypes); }
  static constexpr EnumSet<ReduceOp::Kind> allReduceOps() { return EnumSet<ReduceOp::Kind>::all(ReduceOp::kNumKinds); }
};

// "f32, f64": the members of `set` by name (or "none"), for messages; `count` is the
// enum's number of values, `name` its name function (opName, dtypeName, ...).
template <class E, class NameFn> std::string listNames(EnumSet<E> set, int count, NameFn name) {
  std::string out;
  for (int i = 0; i < count; ++i)
    if (set.has(static_cast<E>(i))) out += (out.empty() ? "" : ", ") + std::string(name(static_cast<E>(i)));
  return out.empty() ? "none" : out;
}

// "allreduce, broadcast, ..." for messages and `commhost plugins inspect`.
COMMHOST_API std::string describe(const Capabilities& caps);

}  // namespace commhost
