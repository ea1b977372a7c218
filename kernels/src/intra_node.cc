// SPDX-License-Identifier: Apache-2.0
#include "commhost/kernels/intra_node.h"

#include <algorithm>

namespace commhost::kernels {
namespace {

constexpr int kMaxDevices = 8;

bool linked(const NvlMesh& m, size_t i, size_t j) { return m[i][j] > 0 && m[j][i] > 0; }

// Square, and links agree both ways (a one-way entry is a broken reading, not a link).
bool wellFormed(const NvlMesh& m) {
  for (const auto& row : m)
    if (row.size() != m.size()) return false;
  for (size_t i = 0; i < m.size(); ++i)
    for (size_t j = 0; j < m.size(); ++j)
      if (i != j && (m[i][j] > 0) != (m[j][i] > 0)) return false;
  return true;
}

}  // namespace

const char* nvlTopologyName(NvlTopology t) {
  switch (t) {
    case NvlTopology::FullyConnected: return "fully connected";
    case NvlTopology::HybridCubeMesh: return "hybrid cube mesh";
    case NvlTopology::Unknown: break;
  }
  return "unknown";
}

const char* intraAlgoName(IntraAlgo a) {
  switch (a) {
    case IntraAlgo::OneShot: return "one-shot";
    case IntraAlgo::TwoShot: return "two-shot";
    case IntraAlgo::HybridCubeMesh: return "hybrid cube mesh";
    case IntraAlgo::None: break;
  }
  return "none";
}

std::optional<std::vector<std::vector<int>>> hybridCubeMeshPeers(const NvlMesh& links) {
  if (links.size() != kMaxDevices || !wellFormed(links)) return std::nullopt;
  std::vector<std::vector<int>> peers(kMaxDevices);
  for (size_t i = 0; i < kMaxDevices; ++i) {
    for (size_t j = 0; j < kMaxDevices; ++j)
      if (i != j && linked(links, i, j)) peers[i].push_back(static_cast<int>(j));
    if (peers[i].size() != 4) return std::nullopt;
  }
  // Each device: three of its peers are linked to each other and to it (its quad, a
  // fully connected group of four), the fourth is linked to none of those three (its
  // partner in the other quad). Counting neighbours alone would accept other 4-regular
  // graphs (e.g. a ring with chords) on which the algorithm's steps would not line up.
  for (size_t i = 0; i < kMaxDevices; ++i) {
    int partners = 0;
    for (int p : peers[i]) {
      int shared = 0;  // i's other peers that p is linked to
      for (int q : peers[i])
        if (q != p && linked(links, static_cast<size_t>(p), static_cast<size_t>(q))) ++shared;
      if (shared == 2) continue;  // p is in i's quad (linked to the quad's other two)
      if (shared != 0) return std::nullopt;
      ++partners;
    }
    if (partners != 1) return std::nullopt;
  }
  return peers;
}

NvlTopology detectTopology(const NvlMesh& links) {
  if (links.size() < 2 || !wellFormed(links)) return NvlTopology::Unknown;
  bool full = true;
  for (size_t i = 0; i < links.size() && full; ++i)
    for (size_t j = i + 1; j < links.size() && full; ++j) full = linked(links, i, j);
  if (full) return NvlTopology::FullyConnected;
  if (hybridCubeMeshPeers(links)) return NvlTopology::HybridCubeMesh;
  return NvlTopology::Unknown;
}

std::string whyNotIntra(NvlTopology topology, int worldSize, size_t bytes, DType dtype, ReduceOp::Kind op,
                        const IntraLimits& limits) {
  if (dtype != DType::BFloat16 && dtype != DType::Float16 && dtype != DType::Float32)
    return std::string("bf16/f16/f32 only, got ") + dtypeName(dtype);
  if (op != ReduceOp::Sum && op != ReduceOp::Avg && op != ReduceOp::PreMulSum)
    return std::string("sum, avg and premul_sum only, got ") + reduceOpName(op);
  if (worldSize < 2 || worldSize > kMaxDevices)
    return "2 to " + std::to_string(kMaxDevices) + " ranks only, got " + std::to_string(worldSize);
  if (bytes % 16 != 0) return "sizes in multiples of 16 bytes only, got " + std::to_string(bytes);
  if (bytes > limits.bufferBytes)
    return std::to_string(bytes) + " bytes exceed the " + std::to_string(limits.bufferBytes) + "-byte peer buffer";
  switch (topology) {
    case NvlTopology::FullyConnected:
      if (bytes > limits.twoShotMax) return "above two_shot_max (" + std::to_string(limits.twoShotMax) + " bytes)";
      return "";
    case NvlTopology::HybridCubeMesh:
      if (worldSize != kMaxDevices) return "a hybrid cube mesh needs all 8 GPUs";
      if (bytes > limits.hcmMax)
        return "above the hybrid cube mesh limit (" + std::to_string(limits.hcmMax) + " bytes)";
      return "";
    case NvlTopology::Unknown: break;
  }
  return "the GPUs are neither fully connected nor a hybrid cube mesh";
}

IntraAlgo selectAllreduce(NvlTopology topology, int worldSize, size_t bytes, DType dtype, ReduceOp::Kind op,
                          const IntraLimits& limits) {
  if (!whyNotIntra(topology, worldSize, bytes, dtype, op, limits).empty()) return IntraAlgo::None;
  if (topology == NvlTopology::HybridCubeMesh) return IntraAlgo::HybridCubeMesh;
  return bytes <= limits.oneShotMax ? IntraAlgo::OneShot : IntraAlgo::TwoShot;
}

}  // namespace commhost::kernels
