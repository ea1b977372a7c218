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

enum class Feature : uint8_t {
  Abort,          // Backend::abort() cancels transfers in flight
  Split,          // the backend can serve subgroups
  AnySource,      // recv_any_source
  Coalescing,     // *_coalesced ops in one transfer
  MultiProcess,   // ranks may be separate processes (not only threads)
  MultiHost,      // ranks may be on separate hosts
};
constexpr int kNumFeatures = 6;
COMMHOST_API const char* featureName(Feature f);

// A set of enum values as a bitmask; constexpr so manifests can be compile-time constants.
template <class E>
class EnumSet {
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
  constexpr EnumSet& add(E v) { bits_ |= bit(v); return *this; }
  constexpr EnumSet& remove(E v) { bits_ &= ~bit(v); return *this; }
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
  static constexpr EnumSet<ReduceOp::Kind> allReduceOps() {
    return EnumSet<ReduceOp::Kind>::all(ReduceOp::kNumKinds);
  }
};

// "allreduce, broadcast, ..." for messages and `commhost plugins inspect`.
COMMHOST_API std::string describe(const Capabilities& caps);

}  // namespace commhost
