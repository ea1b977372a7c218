// SPDX-License-Identifier: Apache-2.0
// Topology detection from NVLink matrices and the intra-node allreduce choice, as the
// device code will call them (it reads the matrix through NVML).
#include <gtest/gtest.h>

#include "commhost/kernels/intra_node.h"

namespace commhost::kernels {
namespace {

NvlMesh fullyConnected(int n, int links = 2) {
  NvlMesh m(static_cast<size_t>(n), std::vector<int>(static_cast<size_t>(n), links));
  for (int i = 0; i < n; ++i) m[static_cast<size_t>(i)][static_cast<size_t>(i)] = 0;
  return m;
}

// DGX-1: quads {0,1,2,3} and {4,5,6,7} fully connected inside, and i linked to i + 4.
NvlMesh hybridCubeMesh() {
  NvlMesh m(8, std::vector<int>(8, 0));
  auto link = [&](int a, int b) {
    m[static_cast<size_t>(a)][static_cast<size_t>(b)] = m[static_cast<size_t>(b)][static_cast<size_t>(a)] = 1;
  };
  for (int base : {0, 4})
    for (int a = base; a < base + 4; ++a)
      for (int b = a + 1; b < base + 4; ++b) link(a, b);
  for (int a = 0; a < 4; ++a) link(a, a + 4);
  return m;
}

TEST(IntraNodeTopology, FullyConnectedFromTwoToEightGpus) {
  for (int n : {2, 4, 8}) EXPECT_EQ(detectTopology(fullyConnected(n)), NvlTopology::FullyConnected) << n;
}

TEST(IntraNodeTopology, HybridCubeMeshWithEachGpusFourPeers) {
  EXPECT_EQ(detectTopology(hybridCubeMesh()), NvlTopology::HybridCubeMesh);
  const auto peers = hybridCubeMeshPeers(hybridCubeMesh());
  ASSERT_TRUE(peers.has_value());
  EXPECT_EQ((*peers)[0], (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ((*peers)[6], (std::vector<int>{2, 4, 5, 7}));
}

TEST(IntraNodeTopology, BrokenMeshesAreUnknown) {
  NvlMesh missing = fullyConnected(8);
  missing[2][5] = missing[5][2] = 0;  // one link down: neither fully connected nor a cube mesh
  EXPECT_EQ(detectTopology(missing), NvlTopology::Unknown);

  NvlMesh oneWay = fullyConnected(4);
  oneWay[1][3] = 0;  // a reading that disagrees with itself
  EXPECT_EQ(detectTopology(oneWay), NvlTopology::Unknown);

  NvlMesh cubeLinkDown = hybridCubeMesh();
  cubeLinkDown[3][7] = cubeLinkDown[7][3] = 0;
  EXPECT_EQ(detectTopology(cubeLinkDown), NvlTopology::Unknown);

  // 4-regular on 8 GPUs but not two quads: a ring where each GPU also reaches the GPUs two
  // away. Counting neighbours alone (as intra_node_comm does) would call it a cube mesh.
  NvlMesh ring(8, std::vector<int>(8, 0));
  for (int i = 0; i < 8; ++i)
    for (int d : {1, 2})
      ring[static_cast<size_t>(i)][static_cast<size_t>((i + d) % 8)] = ring[static_cast<size_t>((i + d) % 8)]
                                                                           [static_cast<size_t>(i)] = 1;
  EXPECT_EQ(detectTopology(ring), NvlTopology::Unknown);
  EXPECT_FALSE(hybridCubeMeshPeers(ring).has_value());

  EXPECT_EQ(detectTopology(NvlMesh{{0, 1}, {1}}), NvlTopology::Unknown) << "not square";
  EXPECT_EQ(detectTopology(NvlMesh{{0}}), NvlTopology::Unknown) << "one GPU";
  EXPECT_EQ(detectTopology(NvlMesh(4, std::vector<int>(4, 0))), NvlTopology::Unknown) << "PCIe only";
}

TEST(IntraNodeAlgorithm, BySizeOnAFullyConnectedHost) {
  const auto fc = NvlTopology::FullyConnected;
  EXPECT_EQ(selectAllreduce(fc, 8, 1024, DType::BFloat16, ReduceOp::Sum), IntraAlgo::OneShot);
  EXPECT_EQ(selectAllreduce(fc, 8, 256 * 1024, DType::BFloat16, ReduceOp::Sum), IntraAlgo::OneShot);
  EXPECT_EQ(selectAllreduce(fc, 8, 256 * 1024 + 16, DType::Float32, ReduceOp::Avg), IntraAlgo::TwoShot);
  EXPECT_EQ(selectAllreduce(fc, 2, 10 * 1024 * 1024, DType::Float16, ReduceOp::Sum), IntraAlgo::TwoShot);
  EXPECT_EQ(selectAllreduce(fc, 2, 10 * 1024 * 1024 + 16, DType::Float16, ReduceOp::Sum), IntraAlgo::None);
  IntraLimits small;
  small.oneShotMax = 4096;
  EXPECT_EQ(selectAllreduce(fc, 4, 8192, DType::BFloat16, ReduceOp::Sum, small), IntraAlgo::TwoShot);
}

TEST(IntraNodeAlgorithm, HybridCubeMeshOnlyForSmallMessagesOnAllEight) {
  const auto hcm = NvlTopology::HybridCubeMesh;
  EXPECT_EQ(selectAllreduce(hcm, 8, 64 * 1024, DType::BFloat16, ReduceOp::Sum), IntraAlgo::HybridCubeMesh);
  EXPECT_EQ(selectAllreduce(hcm, 8, 1024 * 1024, DType::BFloat16, ReduceOp::Sum), IntraAlgo::None);
  EXPECT_EQ(selectAllreduce(hcm, 4, 1024, DType::BFloat16, ReduceOp::Sum), IntraAlgo::None);
  EXPECT_EQ(whyNotIntra(hcm, 4, 1024, DType::BFloat16, ReduceOp::Sum), "a hybrid cube mesh needs all 8 GPUs");
}

TEST(IntraNodeAlgorithm, WhatTheKernelsCannotDoGoesToNcclWithTheReason) {
  const auto fc = NvlTopology::FullyConnected;
  EXPECT_EQ(selectAllreduce(fc, 4, 1024, DType::Int64, ReduceOp::Sum), IntraAlgo::None);
  EXPECT_EQ(whyNotIntra(fc, 4, 1024, DType::Int64, ReduceOp::Sum), "bf16/f16/f32 only, got i64");
  EXPECT_EQ(whyNotIntra(fc, 4, 1024, DType::Float32, ReduceOp::Max), "sum, avg and premul_sum only, got max");
  EXPECT_EQ(whyNotIntra(fc, 1, 1024, DType::Float32, ReduceOp::Sum), "2 to 8 ranks only, got 1");
  EXPECT_EQ(whyNotIntra(fc, 16, 1024, DType::Float32, ReduceOp::Sum), "2 to 8 ranks only, got 16");
  EXPECT_EQ(whyNotIntra(fc, 4, 1000, DType::Float32, ReduceOp::Sum), "sizes in multiples of 16 bytes only, got 1000");
  EXPECT_EQ(whyNotIntra(NvlTopology::Unknown, 4, 1024, DType::Float32, ReduceOp::Sum),
            "the GPUs are neither fully connected nor a hybrid cube mesh");
  EXPECT_STREQ(intraAlgoName(selectAllreduce(fc, 4, 1024, DType::Float32, ReduceOp::Sum)), "one-shot");
  EXPECT_STREQ(nvlTopologyName(detectTopology(hybridCubeMesh())), "hybrid cube mesh");
}

}  // namespace
}  // namespace commhost::kernels
