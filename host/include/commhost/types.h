// SPDX-License-Identifier: Apache-2.0
// Element types, devices and reduction operators shared by every part of commhost.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "commhost/export.h"

namespace commhost {

enum class DType : uint8_t {
  Bool,
  Int8,
  UInt8,
  Int32,
  Int64,
  Float16,
  BFloat16,
  Float32,
  Float64,
};
constexpr int kNumDTypes = 9;

COMMHOST_API size_t elementSize(DType dtype);
// elementSize, inline: on every op's path (Tensor::nbytes), where a call into the library
// per use cost more than the lookup. Indexed by DType's order above. A plugin compiles
// this table in, so the set of DTypes is frozen within an ABI major (a new dtype is a
// new major, as for every boundary type).
constexpr size_t elementBytes(DType dtype) {
  constexpr uint8_t kBytes[] = {1, 1, 1, 4, 8, 2, 2, 4, 8};
  return kBytes[static_cast<uint8_t>(dtype)];
}
COMMHOST_API const char* dtypeName(DType dtype);  // "f32", "bf16", ...
// Accepts short and long names ("f32", "float32", "float"); throws InvalidArgument otherwise.
COMMHOST_API DType parseDType(const std::string& name);
constexpr bool isFloating(DType d) {
  return d == DType::Float16 || d == DType::BFloat16 || d == DType::Float32 || d == DType::Float64;
}

enum class DeviceType : uint8_t { CPU, CUDA };
constexpr int kNumDeviceTypes = 2;
COMMHOST_API const char* deviceTypeName(DeviceType type);  // "cpu", "cuda"

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;  // ignored for CPU

  static Device cpu() { return {DeviceType::CPU, 0}; }
  static Device cuda(int index) { return {DeviceType::CUDA, index}; }
  bool operator==(const Device& o) const { return type == o.type && (type == DeviceType::CPU || index == o.index); }
  bool operator!=(const Device& o) const { return !(*this == o); }
  COMMHOST_API std::string str() const;  // "cpu" or "cuda:N"
};
// Accepts "cpu", "cuda", "cuda:N"; throws InvalidArgument otherwise.
COMMHOST_API Device parseDevice(const std::string& text);

struct ReduceOp {
  enum Kind : uint8_t { Sum, Avg, Product, Min, Max, BAnd, BOr, BXor, PreMulSum };
  static constexpr int kNumKinds = 9;

  Kind kind = Sum;
  double factor = 1.0;  // PreMulSum: every input is multiplied by this before the sum

  ReduceOp() = default;
  ReduceOp(Kind k) : kind(k) {}  // NOLINT: implicit, so ReduceOp::Max reads naturally
  static ReduceOp preMulSum(double f) {
    ReduceOp op(PreMulSum);
    op.factor = f;
    return op;
  }
  bool isBitwise() const { return kind == BAnd || kind == BOr || kind == BXor; }
  bool operator==(const ReduceOp& o) const { return kind == o.kind && factor == o.factor; }
  bool operator!=(const ReduceOp& o) const { return !(*this == o); }
};
COMMHOST_API const char* reduceOpName(ReduceOp::Kind kind);  // "sum", "avg", ...
COMMHOST_API ReduceOp::Kind parseReduceOp(const std::string& name);

// Every collective and point-to-point operation a backend can serve.
enum class OpType : uint8_t {
  Allreduce,
  AllreduceCoalesced,
  Broadcast,
  Reduce,
  Allgather,
  AllgatherIntoTensor,
  AllgatherCoalesced,
  Gather,
  Scatter,
  ReduceScatter,
  ReduceScatterTensor,
  Alltoall,
  AlltoallSingle,
  Barrier,
  MonitoredBarrier,
  Send,
  Recv,
  RecvAnySource,
};
constexpr int kNumOpTypes = 18;
COMMHOST_API const char* opName(OpType op);  // "allreduce", "alltoall_single", ...
// Send, recv and recv_any_source: ops between two ranks, not the whole group.
constexpr bool isPointToPoint(OpType op) {
  return op == OpType::Send || op == OpType::Recv || op == OpType::RecvAnySource;
}
// Ops that take a reduce op: routes may match their `reduce_op`.
constexpr bool isReduction(OpType op) {
  return op == OpType::Allreduce || op == OpType::AllreduceCoalesced || op == OpType::Reduce ||
         op == OpType::ReduceScatter || op == OpType::ReduceScatterTensor;
}
// Ops that move tensors (all but the barriers): routes may match their `dtype`.
constexpr bool carriesData(OpType op) { return op != OpType::Barrier && op != OpType::MonitoredBarrier; }
// Throws InvalidArgument with a "did you mean" hint for an unknown name.
COMMHOST_API OpType parseOpType(const std::string& name);

}  // namespace commhost
