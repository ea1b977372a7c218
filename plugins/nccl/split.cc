// SPDX-License-Identifier: Apache-2.0
#include "split.h"

#include "commhost/sdk/backend_sdk.h"

namespace commhost::nccl_backend {

std::string splitKey(const std::string& round) { return "nccl_split/" + round; }

std::string splitChildId(const std::string& round, int color) {
  return splitKey(round) + "/color" + std::to_string(color);
}

std::string agreedParent(const std::vector<std::string>& votes) {
  if (votes.empty() || votes.front().empty()) return {};
  for (const auto& v : votes)
    if (v != votes.front()) return {};
  return votes.front();
}

std::string agreeOnSplit(const BackendContext& parent, const std::string& round, const char* op,
                         const std::string& vote) {
  // Without a communicator of its own this rank already knows the rule's answer (""), and
  // a communicator exists only where every rank joined it: so no rank holds one when some
  // rank has no backend at all (no GPU there) and never votes. Voting and leaving keeps
  // such a rank from making the others wait; a rank with one still reads every vote.
  if (vote.empty()) {
    publishForExchange(parent, splitKey(round), "");
    return "";
  }
  try {
    return agreedParent(exchangeAll(parent, splitKey(round), vote, op));
  } catch (const TimeoutError& e) {
    rethrowAs(ErrorCode::Timeout,
              std::string(e.what()) + "; every rank of group " + parent.groupName + " calls " + op +
                  ", members of the new subgroup or not, the same number of times in the same order",
              e.where());
  }
}

SplitCall splitCall(const SplitRequest& request, const ErrorContext& where) {
  if (request.color == kNoColor) return {};
  const int size = static_cast<int>(request.members.size());
  if (request.color < 0 || request.rank < 0 || request.rank >= size)
    raise(ErrorCode::InvalidArgument, where,
          "subgroup " + request.group + " came with color " + std::to_string(request.color) + " and rank " +
              std::to_string(request.rank) + " of " + std::to_string(size) + " members",
          "report it to commhost's developers: the host fills SplitRequest");
  return {request.color, request.rank};
}

std::string splitMismatch(const SplitRequest& request, int ncclRank, int ncclSize) {
  const int size = static_cast<int>(request.members.size());
  if (ncclRank == request.rank && ncclSize == size) return {};
  return "ncclCommSplit made rank " + std::to_string(ncclRank) + " of " + std::to_string(ncclSize) +
         " where subgroup " + request.group + " has this rank as " + std::to_string(request.rank) + " of " +
         std::to_string(size);
}

}  // namespace commhost::nccl_backend
