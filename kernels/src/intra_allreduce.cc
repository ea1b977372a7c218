// SPDX-License-Identifier: Apache-2.0
// The device-independent half of intra_allreduce.h: config, layout, signatures, errors.
#include "commhost/kernels/intra_allreduce.h"

#include "commhost/kernels/intra_protocol.h"

namespace commhost::kernels {
namespace {

constexpr size_t kAlign = 256;
size_t roundUp(size_t v, size_t to) { return (v + to - 1) / to * to; }

constexpr int kCountBits = 40;
constexpr uint64_t kCountMask = (uint64_t{1} << kCountBits) - 1;
constexpr uint64_t kValid = uint64_t{1} << 63;

}  // namespace

IntraConfig chooseIntraConfig(int minSmCount, size_t bufferBytes) {
  IntraConfig c;
  // One block per SM at most, so every block is resident at once (a block spinning on a
  // peer's block must never wait for an SM the spinner holds); 24 blocks of 512 threads
  // saturate NVLink for the sizes intra takes (intra_node_comm uses the same order).
  c.blocks = minSmCount < 1 ? 1 : (minSmCount < kIntraMaxBlocks ? minSmCount : kIntraMaxBlocks);
  c.threads = kIntraThreads;
  c.depth = 3;
  c.slotBytes = roundUp(bufferBytes < kAlign ? kAlign : bufferBytes, kAlign);
  return c;
}

IntraLayout intraLayout(const IntraConfig& c) {
  IntraLayout l;
  const size_t perBlock = static_cast<size_t>(c.blocks) * kIntraMaxRanks * sizeof(uint64_t);
  l.posted = static_cast<size_t>(c.depth) * c.slotBytes;
  l.consumed = l.posted + roundUp(perBlock, kAlign);
  l.signatures = l.consumed + roundUp(perBlock, kAlign);
  l.claim = l.signatures + roundUp(perBlock * static_cast<size_t>(c.depth), kAlign);
  l.bytes = l.claim + kAlign;
  l.flagBytes = l.bytes - l.posted;
  return l;
}

uint64_t intraSignature(size_t count, DType dtype, ReduceOp::Kind op, IntraAlgo algo) {
  return kValid | (static_cast<uint64_t>(count) & kCountMask) | (static_cast<uint64_t>(dtype) & 0xff) << 40 |
         (static_cast<uint64_t>(op) & 0xff) << 48 | (static_cast<uint64_t>(algo) & 0xf) << 56;
}

std::string describeIntraSignature(uint64_t s) {
  if (!(s & kValid)) return "no signature";
  const auto dtype = static_cast<DType>((s >> 40) & 0xff);
  const auto op = static_cast<ReduceOp::Kind>((s >> 48) & 0xff);
  const auto algo = static_cast<IntraAlgo>((s >> 56) & 0xf);
  return std::to_string(s & kCountMask) + " x " + dtypeName(dtype) + " " + reduceOpName(op) + " (" +
         intraAlgoName(algo) + ")";
}

int intraSteps(IntraAlgo algo) { return algo == IntraAlgo::TwoShot ? intra::kTwoShotSteps : intra::kOneShotSteps; }

std::string describeIntraError(const IntraError& e) {
  const std::string where = " (block " + std::to_string(e.block) + ", step " + std::to_string(e.step) + ")";
  const char* waitingFor = e.wait == kIntraWaitConsumed ? "finish reading" : "post";
  switch (e.code) {
    case kIntraOk: return "no error";
    case kIntraTimeout:
      return "peer " + std::to_string(e.peer) + " did not " + waitingFor + " its step within the timeout" + where;
    case kIntraAborted:
      return e.peer >= 0 ? "aborted while waiting for peer " + std::to_string(e.peer) + " to " + waitingFor + where
                         : "aborted before it started" + where;
    case kIntraMismatch:
      return "the ranks disagree on the allreduce: this rank has " + describeIntraSignature(e.mine) + ", rank " +
             std::to_string(e.peer) + " has " + describeIntraSignature(e.theirs) + where;
    default: break;
  }
  return "unknown intra-node error code " + std::to_string(e.code) + where;
}

}  // namespace commhost::kernels
