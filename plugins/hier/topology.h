// SPDX-License-Identifier: Apache-2.0
// Which ranks of a group share a host: the two-level layout the hier backend runs on.
// Pure data, computed the same way on every rank from what every rank published.
#pragma once

#include <string>
#include <vector>

namespace commhost::hier {

struct Topology {
  // Group ranks per host, ascending; hosts ordered by their lowest rank. hosts[h][0] is
  // host h's leader, its rank in the inter-host group is h.
  std::vector<std::vector<int>> hosts;
  std::vector<int> hostOf;      // group rank -> its host's index
  std::vector<int> localIndex;  // group rank -> its index within its host
  int maxLocal = 0;             // ranks on the fullest host

  // Ranks with equal identities share a host (identities[r] is rank r's).
  static Topology fromIdentities(const std::vector<std::string>& identities);
  // Consecutive blocks of `blockSize` ranks (the last may be shorter) act as hosts.
  static Topology fromBlocks(int worldSize, int blockSize);
  // ceil(worldSize / groupSize) hosts, rank r on host r mod that: a host's ranks are not
  // consecutive (as under `mpirun --map-by node`).
  static Topology fromRoundRobin(int worldSize, int groupSize);

  int worldSize() const { return static_cast<int>(hostOf.size()); }
  int numHosts() const { return static_cast<int>(hosts.size()); }
  std::vector<int> leaders() const;
  // "2 hosts: [0 1] [2 3]", for logs and messages.
  std::string describe() const;
};

}  // namespace commhost::hier
