// SPDX-License-Identifier: Apache-2.0
// newGroup and split: collective over the parent group, each subgroup working under
// its own store prefix ("<parent>/<label>") so keys of sibling groups never meet.
//
// Every rank of the parent takes part in a round, members or not: once the ranks agree
// on the members (newGroup: the caller's list; split: every rank's color and key through
// the store), each backend of the parent gets prepareSplit() on every rank before any
// subgroup backend exists, so a backend may run a collective over the whole parent there
// (the nccl backend's ncclCommSplit, which ranks outside the subgroups must join too).
#include <algorithm>
#include <set>
#include <sstream>

#include "commhost/errors.h"
#include "commhost/process_group.h"
#include "features.h"
#include "group_state.h"

namespace commhost {
namespace {

// Every configured backend is created for a subgroup too, so each must serve subgroups.
// Checked before any store traffic; every rank of the parent shares the config, so all
// refuse alike.
void requireSplit(const ProcessGroup::Setup& setup, const ErrorContext& where) {
  requireFeature(*setup.config, *setup.registry, Feature::Split, where,
                 "creating a subgroup needs (every configured backend serves every group)",
                 "Create no subgroups with this config, or remove that backend from its backends");
}

}  // namespace

ProcessGroup::Impl::SplitHandles ProcessGroup::Impl::prepareSplits(const SplitRequest& request) {
  SplitHandles prepared;
  const auto& names = state_->routes.backendNames();
  for (size_t i = 0; i < names.size(); ++i) {
    Backend* backend = state_->backends[i].get();
    if (!backend) continue;  // never created here, nor in the subgroup (same config)
    std::shared_ptr<void> handle;
    try {
      handle = backend->prepareSplit(request);
    } catch (const Error&) {
      throw;  // the backend's own error names the group, rank and what to do
    } catch (const std::exception& e) {
      raise(ErrorCode::Plugin, {name_, rank_, request.op},
            "backend '" + names[i] + "' failed to prepare subgroup round " + request.round + ": " + e.what(),
            "report it to the author of its plugin (prepareSplit should throw a commhost::Error), or route its ops "
            "elsewhere");
    }
    if (handle && request.color != kNoColor) prepared[names[i]] = std::move(handle);
  }
  return prepared;
}

std::shared_ptr<ProcessGroup> ProcessGroup::Impl::makeSubgroup(const std::vector<int>& members,
                                                               const std::string& label,
                                                               const SplitHandles& splitFrom) {
  const auto me = std::find(members.begin(), members.end(), rank_);
  if (me == members.end()) return nullptr;
  Setup sub = setup_;
  sub.rank = static_cast<int>(me - members.begin());
  sub.worldSize = static_cast<int>(members.size());
  std::vector<int> global;
  for (int r : members) global.push_back(globalRanks_[r]);
  auto pg = open(std::move(sub), name_ + "/" + label, std::move(global), storePath_ + "/" + label);
  Impl& g = *pg->impl_;
  g.checkSameConfig();
  g.createBackends(splitFrom);
  g.startSupervision();
  return pg;
}

std::shared_ptr<ProcessGroup> ProcessGroup::Impl::newGroup(const std::vector<int>& ranks) {
  std::vector<int> members = ranks;
  std::sort(members.begin(), members.end());
  const ErrorContext where{name_, rank_, "new_group"};
  requireSplit(setup_, where);
  if (members.empty()) raise(ErrorCode::InvalidArgument, where, "the rank list is empty", "pass at least one rank");
  if (std::adjacent_find(members.begin(), members.end()) != members.end())
    raise(ErrorCode::InvalidArgument, where, "the rank list has duplicates", "list each rank once");
  if (members.front() < 0 || members.back() >= worldSize_)
    raise(ErrorCode::InvalidArgument, where,
          "rank " + std::to_string(members.front() < 0 ? members.front() : members.back()) +
              " is outside the group (size " + std::to_string(worldSize_) + ")",
          "use ranks of this group, in [0, " + std::to_string(worldSize_) + ")");
  const std::string label = "sub" + std::to_string(++subgroupCount_);
  SplitRequest request;
  request.op = "new_group";
  request.round = label;
  request.timeout = setup_.config->timeout();
  const auto me = std::find(members.begin(), members.end(), rank_);
  if (me != members.end()) {
    request.group = name_ + "/" + label;
    request.color = 0;  // one subgroup per round
    request.rank = static_cast<int>(me - members.begin());
    request.members = members;
  }
  return makeSubgroup(members, label, prepareSplits(request));
}

std::shared_ptr<ProcessGroup> ProcessGroup::Impl::split(int color, int key) {
  requireSplit(setup_, {name_, rank_, "split"});
  const std::string round = "split" + std::to_string(++subgroupCount_);
  store_->set(round + "/" + std::to_string(rank_), toBytes(std::to_string(color) + " " + std::to_string(key)));
  std::vector<std::string> keys;
  for (int r = 0; r < worldSize_; ++r) keys.push_back(round + "/" + std::to_string(r));
  try {
    store_->wait(keys, setup_.config->timeout());
  } catch (const TimeoutError& e) {
    raise(ErrorCode::Timeout, {name_, rank_, "split"}, e.what(),
          "every rank of the group must call split() the same number of times");
  }
  const auto values = store_->multiGet(keys);
  SplitRequest request;
  request.op = "split";
  request.round = round;
  request.timeout = setup_.config->timeout();
  if (color < 0) {
    prepareSplits(request);  // in no subgroup, but the backends' round includes this rank
    return nullptr;
  }
  std::vector<std::pair<int, int>> byKey;  // (key, rank) of ranks with my color
  for (int r = 0; r < worldSize_; ++r) {
    std::istringstream in(toString(values[r]));
    int theirColor = 0, theirKey = 0;
    in >> theirColor >> theirKey;
    if (theirColor == color) byKey.emplace_back(theirKey, r);
  }
  std::sort(byKey.begin(), byKey.end());
  std::vector<int> members;
  for (const auto& kr : byKey) members.push_back(kr.second);
  // makeSubgroup expects our index to follow the order, so pass members in key order.
  const std::string label = round + "c" + std::to_string(color);
  request.group = name_ + "/" + label;
  request.color = color;
  request.rank = static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
  request.members = members;
  return makeSubgroup(members, label, prepareSplits(request));
}

}  // namespace commhost
