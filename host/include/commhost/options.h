// SPDX-License-Identifier: Apache-2.0
// Per-operation options. A zero timeout means "the group's default" (group.timeout).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "commhost/sdk/abi.h"
#include "commhost/types.h"

namespace commhost {

using Millis = std::chrono::milliseconds;

struct AllreduceOptions {
  ReduceOp reduceOp;
  Millis timeout{0};
};
struct AllreduceCoalescedOptions {
  ReduceOp reduceOp;
  Millis timeout{0};
};
struct BroadcastOptions {
  int root = 0;
  Millis timeout{0};
};
struct ReduceOptions {
  int root = 0;
  ReduceOp reduceOp;
  Millis timeout{0};
};
struct AllgatherOptions {
  Millis timeout{0};
};
struct GatherOptions {
  int root = 0;
  Millis timeout{0};
};
struct ScatterOptions {
  int root = 0;
  Millis timeout{0};
};
struct ReduceScatterOptions {
  ReduceOp reduceOp;
  Millis timeout{0};
};
struct AlltoallOptions {
  Millis timeout{0};
};
// Split sizes count rows of dimension 0; empty means equal splits.
struct AlltoallSingleOptions {
  std::vector<int64_t> outputSplitSizes;
  std::vector<int64_t> inputSplitSizes;
  Millis timeout{0};
};
struct BarrierOptions {
  Millis timeout{0};
};
struct MonitoredBarrierOptions {
  Millis timeout{0};
  bool waitAllRanks = false;  // report every missing rank, not only the first
};
struct SendOptions {
  int tag = 0;
  Millis timeout{0};
};
struct RecvOptions {
  int tag = 0;
  Millis timeout{0};
};

// What the ProcessGroup tells the backend about one call, besides its tensors. Filled
// by the host for every call (frozen within ABI major 2; prefix as abi.h explains).
// ErrorContext::of(ctx) turns it into the prefix of an error message.
struct OpContext {
  uint32_t size = sizeof(OpContext);
  uint32_t magic = kOpContextMagic;
  uint32_t abiVersion = kAbiVersion;
  OpType op = OpType::Allreduce;
  // The group's sequence number: equal on every rank for the same collective, so
  // backends may use it as a matching tag. Point-to-point ops count apart (1, 2, ...).
  uint64_t seq = 0;
  Millis timeout{0};  // resolved: never zero
  std::string group;  // the group's name ("main", "main/sub1", ...)
  int rank = -1;      // this rank in that group
  // The caller's CUDA stream (a cudaStream_t) for ops on CUDA tensors: the one the calling
  // thread set with setCurrentStream() (commhost/stream.h); null: the legacy default
  // stream. A device backend makes its own stream wait on this one before the op, and
  // Work::wait() makes this one wait on the op's end. Host-only backends ignore it.
  void* stream = nullptr;
};

}  // namespace commhost
