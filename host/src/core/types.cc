// SPDX-License-Identifier: Apache-2.0
#include "commhost/types.h"

#include <vector>

#include "commhost/errors.h"
#include "commhost/sdk/option_schema.h"

namespace commhost {
namespace {

struct DTypeInfo {
  DType dtype;
  size_t size;
  const char* name;
  const char* longName;
};
constexpr DTypeInfo kDTypes[kNumDTypes] = {
    {DType::Bool, 1, "bool", "bool"},         {DType::Int8, 1, "i8", "int8"},
    {DType::UInt8, 1, "u8", "uint8"},         {DType::Int32, 4, "i32", "int32"},
    {DType::Int64, 8, "i64", "int64"},        {DType::Float16, 2, "f16", "float16"},
    {DType::BFloat16, 2, "bf16", "bfloat16"}, {DType::Float32, 4, "f32", "float32"},
    {DType::Float64, 8, "f64", "float64"},
};

constexpr bool inlineSizesMatch() {
  for (const auto& info : kDTypes)
    if (elementBytes(info.dtype) != info.size) return false;
  return true;
}
static_assert(inlineSizesMatch(), "elementBytes (types.h) must follow this table");

constexpr bool sizesArePowersOfTwo() {
  for (const auto& info : kDTypes)
    if (info.size == 0 || (info.size & (info.size - 1)) != 0) return false;
  return true;
}
// The supervisor's per-op record turns bytes into elements with a shift (supervisor.cc).
static_assert(sizesArePowersOfTwo(), "an element size that is not a power of two");

constexpr const char* kOpNames[kNumOpTypes] = {
    "allreduce",
    "allreduce_coalesced",
    "broadcast",
    "reduce",
    "allgather",
    "allgather_into_tensor",
    "allgather_coalesced",
    "gather",
    "scatter",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "alltoall",
    "alltoall_single",
    "barrier",
    "monitored_barrier",
    "send",
    "recv",
    "recv_any_source",
};

constexpr const char* kReduceOpNames[ReduceOp::kNumKinds] = {
    "sum", "avg", "product", "min", "max", "band", "bor", "bxor", "premul_sum",
};

template <size_t N> std::vector<std::string> toVector(const char* const (&names)[N]) {
  return std::vector<std::string>(names, names + N);
}

// `hint` replaces the nearest name, for a spelling other libraries use (`note` says whose).
[[noreturn]] void unknownName(const char* what, const std::string& name, const std::vector<std::string>& known,
                              std::string hint = "", const std::string& note = "") {
  if (hint.empty()) hint = closestMatch(name, known);
  std::string list;
  for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
  throw InvalidArgument("unknown " + std::string(what) + " '" + name + "'" +
                        (hint.empty() ? "" : " (did you mean '" + hint + "'" + note + "?)") + "; known: " + list);
}

}  // namespace

size_t elementSize(DType dtype) { return kDTypes[static_cast<int>(dtype)].size; }
const char* dtypeName(DType dtype) { return kDTypes[static_cast<int>(dtype)].name; }

DType parseDType(const std::string& name) {
  std::vector<std::string> known;
  for (const auto& info : kDTypes) {
    if (name == info.name || name == info.longName) return info.dtype;
    known.push_back(info.name);
  }
  if (name == "float") return DType::Float32;
  if (name == "double") return DType::Float64;
  if (name == "half") return DType::Float16;
  unknownName("dtype", name, known);
}

const char* deviceTypeName(DeviceType type) { return type == DeviceType::CPU ? "cpu" : "cuda"; }

std::string Device::str() const { return type == DeviceType::CPU ? "cpu" : "cuda:" + std::to_string(index); }

Device parseDevice(const std::string& text) {
  if (text == "cpu") return Device::cpu();
  if (text == "cuda") return Device::cuda(0);
  if (text.rfind("cuda:", 0) == 0) {
    const std::string digits = text.substr(5);
    if (!digits.empty() && digits.find_first_not_of("0123456789") == std::string::npos)
      return Device::cuda(std::stoi(digits));
  }
  unknownName("device", text, {"cpu", "cuda", "cuda:0"});
}

const char* reduceOpName(ReduceOp::Kind kind) { return kReduceOpNames[kind]; }

ReduceOp::Kind parseReduceOp(const std::string& name) {
  for (int i = 0; i < ReduceOp::kNumKinds; ++i)
    if (name == kReduceOpNames[i]) return static_cast<ReduceOp::Kind>(i);
  // One spelling per op, c10d's (ReduceOp.PRODUCT); NCCL and nccl-tests say "prod".
  if (name == "prod") unknownName("reduce op", name, toVector(kReduceOpNames), "product", ", c10d's spelling");
  unknownName("reduce op", name, toVector(kReduceOpNames));
}

const char* opName(OpType op) { return kOpNames[static_cast<int>(op)]; }

OpType parseOpType(const std::string& name) {
  for (int i = 0; i < kNumOpTypes; ++i)
    if (name == kOpNames[i]) return static_cast<OpType>(i);
  unknownName("op", name, toVector(kOpNames));
}

}  // namespace commhost
