// SPDX-License-Identifier: Apache-2.0
// Intra-node allreduce over peer GPU memory (intra_node_comm's one-shot / two-shot): how
// the GPUs of a host are wired, and which algorithm a message takes. Plain C++ with no
// CUDA: the device code asks these (with an NVLink matrix read through NVML) and the unit
// tests feed them matrices.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "commhost/types.h"

namespace commhost::kernels {

// links[i][j]: NVLink links from device i to device j (NVSwitch links count toward every
// pair both devices reach through a switch); the diagonal is ignored.
using NvlMesh = std::vector<std::vector<int>>;

enum class NvlTopology {
  FullyConnected,  // every pair linked both ways (NVSwitch systems, or 2-4 directly linked GPUs)
  HybridCubeMesh,  // 8 GPUs as two fully connected quads plus one link from each GPU to the
                   // other quad (DGX-1): every GPU reaches 4 peers directly
  Unknown,         // anything else, including a matrix that is not square or not symmetric
};
const char* nvlTopologyName(NvlTopology t);  // "fully connected", "hybrid cube mesh", "unknown"

NvlTopology detectTopology(const NvlMesh& links);

// For a hybrid cube mesh: each device's four direct peers, ascending (the three of its
// quad and its partner in the other quad); nullopt when `links` is not one.
std::optional<std::vector<std::vector<int>>> hybridCubeMeshPeers(const NvlMesh& links);

enum class IntraAlgo {
  None,            // leave it to NCCL
  OneShot,         // every rank reads every peer's whole buffer and reduces (one step)
  TwoShot,         // reduce-scatter over peers' slices, then allgather (two steps)
  HybridCubeMesh,  // one-shot within the quad, then exchange with the partner
};
const char* intraAlgoName(IntraAlgo a);  // "none", "one-shot", "two-shot", "hybrid cube mesh"

// The limits the selection works with; the defaults are intra_node_comm's.
struct IntraLimits {
  size_t oneShotMax = 256 * 1024;         // bytes up to which one-shot runs (fully connected)
  size_t twoShotMax = 10 * 1024 * 1024;   // bytes up to which two-shot runs (fully connected)
  size_t hcmMax = 256 * 1024;             // bytes up to which the hybrid cube mesh runs
  size_t bufferBytes = 10 * 1024 * 1024;  // each rank's peer-visible buffer: no message may exceed it
};

// The algorithm for one allreduce: only bf16, f16 and f32 sum-like reductions (the kernels'
// types), 2 to 8 ranks, 16-byte-aligned sizes that fit the buffer; every rank computes the
// same answer from the same arguments, so no agreement is needed.
IntraAlgo selectAllreduce(NvlTopology topology, int worldSize, size_t bytes, DType dtype, ReduceOp::Kind op,
                          const IntraLimits& limits = {});

// Why `selectAllreduce` said None, for logs ("bf16/f16/f32 only, got i64"); "" otherwise.
std::string whyNotIntra(NvlTopology topology, int worldSize, size_t bytes, DType dtype, ReduceOp::Kind op,
                        const IntraLimits& limits = {});

}  // namespace commhost::kernels
