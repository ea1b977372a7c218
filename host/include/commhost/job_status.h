// SPDX-License-Identifier: Apache-2.0
// The live status of a running job: what each process's supervisor publishes to the job's
// store once per heartbeat interval (supervisor.heartbeat.interval), and what
// `commhost status`, `commhost top` and `commhost run --metrics` read back.
//
// One schema, one writer (the supervisor's heartbeat thread) and one reader
// (readJobStatus), both in host/src/supervisor/status_schema.cc. A process publishes one
// record under "commhost/status/<global rank>"; the job's world size is under
// "commhost/status/world". A record of another version is not read: readJobStatus names
// the rank and both versions instead.
//
// Cost on the ranks: building and writing one record (its time is in publishCostUs); a
// reader costs the ranks nothing, since it reads the store only.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "commhost/export.h"
#include "commhost/store.h"

namespace commhost {

// Bumped when a field changes meaning or goes; a new optional field keeps the version.
constexpr int kJobStatusVersion = 1;

struct OpInFlight {
  std::string op;
  uint64_t seq = 0;
  std::string backend;
  double seconds = 0;  // since it was issued
};

struct GroupStatus {
  std::string name;
  int rank = 0;
  int worldSize = 1;
  std::vector<int> globalRanks;  // the job's rank of each group rank
  uint64_t generation = 0;       // the config generation (hot swaps and membership changes bump it)
  std::string configHash, configSource;
  std::vector<std::string> backends;  // "name", or "name (unavailable: why)"
  std::vector<std::string> routes;    // the resolved route table, one line per run of cells
  // Collectives (not p2p): the last issued and completed, by seq.
  uint64_t lastIssuedSeq = 0;
  std::string lastIssuedOp;  // "none" before the first
  uint64_t lastCompletedSeq = 0;
  int inFlight = 0;                      // works issued and not completed
  std::optional<OpInFlight> oldest;      // the oldest of them
  std::map<int, double> heartbeatAge;    // watched peer (group rank) -> seconds since its last beat changed
  std::map<int, std::string> lostPeers;  // group rank -> why (-1: the store)
  std::vector<int> leftPeers;            // ranks that destroyed the group (a clean exit)
};

struct StatusEvent {
  uint64_t id = 0;  // grows in each process; (rank, id) names an event once
  int64_t unixMs = 0;
  std::string kind;  // "peer_lost", "swap_started", "swap_committed", "swap_rolled_back",
                     // "membership", "incident", "shadow_disagree", "shadow_failed", "rerouted" (tune: live)
  std::string group;
  std::string text;
};

// One (group, op, backend, size class) cell of the process's completed ops.
struct OpStat {
  std::string group, op, backend;
  std::string sizeClass;  // "le1KiB", "le64KiB", "le1MiB", "le16MiB", "gt16MiB"
  uint64_t completed = 0, failed = 0;
  uint64_t bytes = 0;
  // How many of the completed ops have a latency: latencySumUs and buckets count these.
  // Small ops are timed by sample (supervisor.flight_recorder.time_every).
  uint64_t timed = 0;
  uint64_t latencySumUs = 0;
  std::vector<uint64_t> buckets;  // per latencyBucketsUs, then +Inf; not cumulative
};

// A shadowed route's tally: how many sampled calls the shadow backend agreed on.
struct ShadowTally {
  std::string group, op, backend, shadow;
  uint64_t agree = 0, disagree = 0, failed = 0;
};

struct ProcessStatus {
  int version = kJobStatusVersion;
  int rank = 0;  // global rank
  std::string host;
  int pid = 0;
  int64_t publishedUnixMs = 0;
  int64_t intervalMs = 0;    // how often it publishes
  double publishCostUs = 0;  // what building and writing the previous record cost this process
  std::vector<GroupStatus> groups;
  std::vector<StatusEvent> events;              // the last ones, oldest first
  std::map<std::string, uint64_t> eventCounts;  // every event since the process started, by kind
  std::vector<OpStat> ops;
  std::vector<int64_t> latencyBucketsUs;  // upper bounds of OpStat::buckets
  // Ops that left the flight recorder before the statistics read them (a rate above
  // supervisor.flight_recorder.entries per 100 ms): counted, without labels.
  uint64_t opsMissed = 0;
  std::vector<ShadowTally> shadows;
  // This process's calls to the job's store since it started, by op ("set", "get", "add",
  // "compare_set", "wait", "check", "delete", "num_keys", "multi_get", "multi_set",
  // "append"), and those that failed (a timeout included). Absent in older records.
  std::map<std::string, uint64_t> storeRequests, storeFailures;
};

// Every process's latest record, in rank order. Ranks that published nothing yet, or whose
// record cannot be read (another version, not JSON), are left out and named in `problems`.
// `worldSize`, when given, gets the job's world as the ranks published it (0: none yet).
COMMHOST_API std::vector<ProcessStatus> readJobStatus(Store& jobStore, std::vector<std::string>* problems,
                                                      int* worldSize = nullptr);
// The record as JSON text (what the store holds, and `commhost status --json` prints).
COMMHOST_API std::string jobStatusJson(const std::vector<ProcessStatus>& statuses);

}  // namespace commhost
