// SPDX-License-Identifier: Apache-2.0
// computeBucketAssignmentBySize: c10d's compute_bucket_assignment_by_size without sparse
// gradients (commhost has none).
#include <algorithm>
#include <string>
#include <vector>

#include "commhost/errors.h"
#include "commhost/reducer.h"

namespace commhost {
namespace {

// One (dtype, device) group's bucket being filled.
struct Accumulator {
  int dtype = 0;
  Device device;
  std::vector<size_t> indices;
  int64_t bytes = 0;
  size_t capIndex = 0;  // which of capsBytes the group's next bucket uses
};

}  // namespace

std::vector<std::vector<size_t>> computeBucketAssignmentBySize(const std::vector<ParamInfo>& params,
                                                               const std::vector<int64_t>& capsBytes,
                                                               const std::vector<size_t>& order) {
  if (capsBytes.empty())
    raise(ErrorCode::InvalidArgument, {}, "computeBucketAssignmentBySize got no bucket caps",
          "pass at least one cap, e.g. {firstBucketCapBytes, bucketCapBytes}");
  const bool defaultOrder = order.empty();
  std::vector<size_t> visit = order;
  if (defaultOrder) {
    // Gradients arrive roughly in reverse definition order, so the last parameters fill
    // the first (small) bucket.
    for (size_t i = params.size(); i-- > 0;) visit.push_back(i);
  } else {
    std::vector<bool> seen(params.size(), false);
    for (size_t i : order) {
      if (i >= params.size() || seen[i])
        raise(ErrorCode::InvalidArgument, {},
              "computeBucketAssignmentBySize: order is not a permutation of the " + std::to_string(params.size()) +
                  " parameters (index " + std::to_string(i) + ")",
              "list every parameter index exactly once");
      seen[i] = true;
    }
    if (order.size() != params.size())
      raise(ErrorCode::InvalidArgument, {},
            "computeBucketAssignmentBySize: order lists " + std::to_string(order.size()) + " of " +
                std::to_string(params.size()) + " parameters",
            "list every parameter index exactly once");
  }

  std::vector<std::vector<size_t>> result;
  // Groups in order of first appearance (c10d keeps them in an unordered_map; a fixed
  // order makes the leftover buckets below the same on every rank and every run).
  std::vector<Accumulator> groups;
  for (size_t index : visit) {
    const ParamInfo& p = params[index];
    auto it = std::find_if(groups.begin(), groups.end(), [&](const Accumulator& a) {
      return a.dtype == static_cast<int>(p.dtype) && a.device == p.device;
    });
    if (it == groups.end()) {
      groups.push_back({static_cast<int>(p.dtype), p.device, {}, 0, 0});
      it = groups.end() - 1;
    }
    it->indices.push_back(index);
    it->bytes += p.shape.numel() * static_cast<int64_t>(elementSize(p.dtype));
    if (it->bytes >= capsBytes[it->capIndex]) {
      result.push_back(std::move(it->indices));
      it->indices.clear();
      it->bytes = 0;
      // The last cap applies to every later bucket of the group.
      if (it->capIndex + 1 < capsBytes.size()) ++it->capIndex;
    }
  }
  for (auto& g : groups)
    if (!g.indices.empty()) result.push_back(std::move(g.indices));

  // c10d sorts the default assignment by each bucket's smallest index and DDP then
  // reverses it, so that buckets go in the order their gradients become ready: here that
  // is descending smallest index. An explicit order (the rebuild's ready order) is kept
  // as the buckets closed.
  if (defaultOrder) {
    std::stable_sort(result.begin(), result.end(), [](const std::vector<size_t>& a, const std::vector<size_t>& b) {
      return *std::min_element(a.begin(), a.end()) > *std::min_element(b.begin(), b.end());
    });
  }
  return result;
}

}  // namespace commhost
