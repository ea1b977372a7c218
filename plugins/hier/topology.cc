// SPDX-License-Identifier: Apache-2.0
#include "topology.h"

#include <algorithm>
#include <map>

namespace commhost::hier {
namespace {

// Fills hostOf, localIndex and maxLocal from hosts.
Topology finish(std::vector<std::vector<int>> hosts, int worldSize) {
  Topology t;
  t.hosts = std::move(hosts);
  t.hostOf.assign(static_cast<size_t>(worldSize), -1);
  t.localIndex.assign(static_cast<size_t>(worldSize), -1);
  for (size_t h = 0; h < t.hosts.size(); ++h) {
    t.maxLocal = std::max(t.maxLocal, static_cast<int>(t.hosts[h].size()));
    for (size_t j = 0; j < t.hosts[h].size(); ++j) {
      t.hostOf[static_cast<size_t>(t.hosts[h][j])] = static_cast<int>(h);
      t.localIndex[static_cast<size_t>(t.hosts[h][j])] = static_cast<int>(j);
    }
  }
  return t;
}

}  // namespace

Topology Topology::fromIdentities(const std::vector<std::string>& identities) {
  std::map<std::string, size_t> index;  // identity -> host, in order of first appearance
  std::vector<std::vector<int>> hosts;
  for (size_t r = 0; r < identities.size(); ++r) {
    const auto it = index.emplace(identities[r], hosts.size()).first;
    if (it->second == hosts.size()) hosts.emplace_back();
    hosts[it->second].push_back(static_cast<int>(r));
  }
  return finish(std::move(hosts), static_cast<int>(identities.size()));
}

Topology Topology::fromBlocks(int worldSize, int blockSize) {
  std::vector<std::vector<int>> hosts;
  for (int r = 0; r < worldSize; ++r) {
    if (r % blockSize == 0) hosts.emplace_back();
    hosts.back().push_back(r);
  }
  return finish(std::move(hosts), worldSize);
}

Topology Topology::fromRoundRobin(int worldSize, int groupSize) {
  const int count = (worldSize + groupSize - 1) / groupSize;
  std::vector<std::vector<int>> hosts(static_cast<size_t>(count));
  for (int r = 0; r < worldSize; ++r) hosts[static_cast<size_t>(r % count)].push_back(r);
  return finish(std::move(hosts), worldSize);
}

std::vector<int> Topology::leaders() const {
  std::vector<int> out;
  for (const auto& h : hosts) out.push_back(h.front());
  return out;
}

std::string Topology::describe() const {
  std::string out = std::to_string(hosts.size()) + (hosts.size() == 1 ? " host:" : " hosts:");
  for (const auto& h : hosts) {
    out += " [";
    for (size_t j = 0; j < h.size(); ++j) out += (j ? " " : "") + std::to_string(h[j]);
    out += "]";
  }
  return out;
}

}  // namespace commhost::hier
