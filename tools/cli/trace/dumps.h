// SPDX-License-Identifier: Apache-2.0
// The flight recorder dumps of one job (rank<N>.json, written by the supervisor), loaded
// for `commhost trace analyze` and `commhost trace export`.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace commhost::cli::trace {

struct Entry {
  std::string group, op, backend, dtype, state, error;
  int rank = 0;  // in its group
  int worldSize = 0;
  uint64_t seq = 0;
  uint64_t generation = 0;  // the group's config generation that routed it (hot swap)
  int64_t bytes = 0, numel = 0;
  int64_t scheduledUs = 0, startedUs = 0, endedUs = 0;
  double deviceMs = -1;  // the op's time on its device (device_ms), -1 when the dump has none
  bool pointToPoint() const { return op == "send" || op == "recv" || op == "recv_any_source"; }
};

// One hot swap (ProcessGroup::reconfigure) as one rank saw it.
struct Swap {
  std::string group, outcome, error;
  int rank = 0;  // in its group
  uint64_t fromGeneration = 0, toGeneration = 0;
  int64_t startedUs = 0, checkUs = 0, drainUs = 0, buildUs = 0, commitUs = 0, totalUs = 0;
};

// One membership change (ProcessGroup::shrink) as one rank saw it.
struct Membership {
  std::string group, outcome, error;  // outcome: shrunk, failed, removed, refused
  int rankBefore = 0, rankAfter = -1, worldBefore = 0, worldAfter = 0;
  uint64_t fromGeneration = 0, toGeneration = 0;
  std::vector<int> removed;  // global ranks
  int64_t startedUs = 0, agreeUs = 0, buildUs = 0, confirmUs = 0, commitUs = 0, totalUs = 0;
};

// One shadowed call (a route's shadow backend re-ran it and the results were compared).
struct ShadowRun {
  std::string group, op, backend, shadow, outcome, detail;  // outcome: agree, disagree, failed
  int rank = 0;                                             // in its group
  uint64_t seq = 0;
  int64_t bytes = 0, backendUs = 0, shadowUs = 0;
};

struct RankDump {
  std::string path;
  int rank = -1;  // global rank of the process
  int pid = 0;
  std::string host, reason;
  int64_t timeUs = 0;
  std::vector<Entry> entries;            // oldest first
  std::vector<Swap> swaps;               // oldest first
  std::vector<ShadowRun> shadows;        // oldest first
  std::vector<Membership> memberships;   // oldest first
  std::map<std::string, int> groupRank;  // group name -> this process's rank in it
  std::map<std::string, int> groupSize;
  std::map<std::string, std::string> lostPeers;  // "group: peer N: why"
};

// Reads every *.json file in `dir` that is a commhost dump; throws InvalidArgument
// naming the directory when there is none, and the file for one that does not parse.
std::vector<RankDump> loadDumps(const std::string& dir);

// One paragraph per group: the first collective where ranks diverge, and what to do.
std::string analyze(const std::vector<RankDump>& dumps);

// A Chrome trace (Perfetto / chrome://tracing): one track per rank, one slice per op.
std::string chromeTrace(const std::vector<RankDump>& dumps);

}  // namespace commhost::cli::trace
