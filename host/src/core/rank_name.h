// SPDX-License-Identifier: Apache-2.0
// How a message names a rank of a subgroup: its rank there, and its global (world) rank
// when they differ, since the launcher's output and the logs number ranks globally.
#pragma once

#include <string>
#include <vector>

namespace commhost {

// "3", or "1 (global 3)". `globalRanks`: the group's members by group rank; a rank outside
// it is named as it is.
inline std::string rankName(int rank, const std::vector<int>& globalRanks) {
  const bool inGroup = rank >= 0 && rank < static_cast<int>(globalRanks.size());
  if (!inGroup || globalRanks[rank] == rank) return std::to_string(rank);
  return std::to_string(rank) + " (global " + std::to_string(globalRanks[rank]) + ")";
}

}  // namespace commhost
