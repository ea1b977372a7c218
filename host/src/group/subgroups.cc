// SPDX-License-Identifier: Apache-2.0
// newGroup and split: collective over the parent group, each subgroup working under
// its own store prefix ("<parent>/<label>") so keys of sibling groups never meet.
#include <algorithm>
#include <set>
#include <sstream>

#include "commhost/errors.h"
#include "commhost/process_group.h"
#include "features.h"

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

std::shared_ptr<ProcessGroup> ProcessGroup::makeSubgroup(const std::vector<int>& members, const std::string& label) {
  const auto me = std::find(members.begin(), members.end(), rank_);
  if (me == members.end()) return nullptr;
  Setup sub = setup_;
  sub.rank = static_cast<int>(me - members.begin());
  sub.worldSize = static_cast<int>(members.size());
  std::vector<int> global;
  for (int r : members) global.push_back(globalRanks_[r]);
  std::shared_ptr<ProcessGroup> pg(new ProcessGroup(std::move(sub), name_ + "/" + label, std::move(global)));
  pg->store_ = std::make_shared<PrefixStore>(label, store_);
  pg->checkSameConfig();
  pg->createBackends();
  pg->startSupervision();
  return pg;
}

std::shared_ptr<ProcessGroup> ProcessGroup::newGroup(const std::vector<int>& ranks) {
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
  return makeSubgroup(members, "sub" + std::to_string(++subgroupCount_));
}

std::shared_ptr<ProcessGroup> ProcessGroup::split(int color, int key) {
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
  if (color < 0) return nullptr;
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
  return makeSubgroup(members, round + "c" + std::to_string(color));
}

}  // namespace commhost
