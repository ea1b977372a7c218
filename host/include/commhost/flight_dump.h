// SPDX-License-Identifier: Apache-2.0
// The flight-recorder dump: what a process writes to supervisor.flight_recorder.dump_dir
// (rank<N>.json) on a timeout or error, on SIGUSR1 or `commhost trace dump`, and what
// `commhost trace analyze` / `trace export` read back.
//
// One schema, one writer (encodeFlightDump, called by the supervisor) and one reader
// (decodeFlightDump, called by `commhost trace`), both in
// host/src/supervisor/dump_schema.cc, so the two cannot drift apart. A dump of another
// version is refused by name, with both versions, instead of being half read.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "commhost/export.h"

namespace commhost {

// Bumped when a field changes meaning or goes; a new optional field keeps the version.
constexpr int kFlightDumpVersion = 1;

// One collective or point-to-point op the recorder saw.
struct DumpOp {
  uint64_t id = 0;  // process-wide, increasing
  std::string group, op, backend, dtype;
  std::string state;  // "started", "completed", "failed"
  std::string error;  // why it failed; empty otherwise
  int rank = 0;       // in its group
  int worldSize = 0;
  uint64_t seq = 0;
  uint64_t generation = 0;  // the group's config generation that routed it (hot swap)
  int64_t bytes = 0, numel = 0;
  int64_t scheduledUs = 0, startedUs = 0, endedUs = 0;  // wall clock; endedUs 0 while in flight
  // false: a small op run inline that was not timed (supervisor.flight_recorder.time_every):
  // its three times are one, not its own (its thread's last timed op, or the heartbeat's
  // last clock reading, normally under 100 ms before; the coarse clock when recorded into
  // the shared ring), and it has no duration.
  bool timed = true;
  double deviceMs = -1;  // the op's time on its device, -1 when its backend did not time it
  bool pointToPoint() const { return op == "send" || op == "recv" || op == "recv_any_source"; }
};

// One hot swap (ProcessGroup::reconfigure) on this rank: its outcome and phase times.
struct SwapRecord {
  std::string group;
  int rank = 0;
  uint64_t fromGeneration = 0;
  uint64_t toGeneration = 0;  // == fromGeneration when it did not commit
  std::string outcome;        // "committed", "rolled_back"
  int64_t startedUs = 0;      // wall clock
  int64_t checkUs = 0, drainUs = 0, buildUs = 0, commitUs = 0, totalUs = 0;
  std::vector<std::string> kept, built, removed;  // backends
  std::string error;                              // why it rolled back
  // Outcome "rerouted" (tune: live, a routes-only swap): each size class moved and each
  // candidate dropped, one line each; no backend was kept, built or removed.
  std::vector<std::string> rerouted;
};

// One membership change (ProcessGroup::shrink) on this rank: who left, the phase times.
struct MembershipRecord {
  std::string group;
  int rankBefore = 0;  // this rank's rank in the group before
  int rankAfter = -1;  // and after (-1: it did not become a member)
  int worldBefore = 0, worldAfter = 0;
  uint64_t fromGeneration = 0, toGeneration = 0;
  std::vector<int> removed;  // global ranks no longer members
  std::string outcome;       // "shrunk", "failed", "removed" (this rank left out), "refused" (below min_ranks)
  std::string error;         // why it did not shrink
  int64_t startedUs = 0;     // wall clock
  int64_t agreeUs = 0, buildUs = 0, confirmUs = 0, commitUs = 0, totalUs = 0;
};

// One sampled call compared with its route's shadow backend (shadow mode).
struct ShadowEvent {
  std::string group;
  int rank = 0;
  uint64_t seq = 0;
  std::string op;
  int64_t bytes = 0;
  std::string backend, shadow;
  std::string outcome;  // "agree", "disagree", "failed"
  double backendUs = 0, shadowUs = 0;
  std::string detail;  // where they differ, or why one failed
};

// A group of the dumping process, as it stood at the dump.
struct DumpGroup {
  std::string name;
  int rank = 0;
  int worldSize = 0;
  std::vector<int> globalRanks;  // the job's rank of each group rank
  uint64_t lastIssued = 0, lastCompleted = 0;
  std::map<int, std::string> lostPeers;  // group rank -> why (-1: the store)
  std::vector<int> leftPeers;            // ranks that destroyed the group (a clean exit)
};

struct FlightDump {
  int version = kFlightDumpVersion;
  std::string reason;  // why it was written ("timeout", "SIGUSR1", ...)
  int rank = -1;       // the process's global rank
  int pid = 0;
  std::string host;
  int64_t timeUs = 0;  // wall clock at the dump
  uint64_t entriesCapacity = 0;
  std::vector<DumpGroup> groups;
  std::vector<DumpOp> entries;  // each list oldest first
  std::vector<SwapRecord> swaps;
  std::vector<MembershipRecord> memberships;
  std::vector<ShadowEvent> shadows;

  COMMHOST_API const DumpGroup* group(const std::string& name) const;  // null when the process had no such group
};

// The dump as JSON text (what rank<N>.json holds).
COMMHOST_API std::string encodeFlightDump(const FlightDump& dump);

// Reads a dump written by encodeFlightDump; `where` (a file name) is for messages.
// Returns nullopt for JSON that is not a dump at all (no "rank" and "entries"), so a
// directory may hold other files. Throws InvalidArgument, naming `where` and what to do,
// for text that is not JSON, a dump of another version (both versions named), and a
// field of the wrong type.
COMMHOST_API std::optional<FlightDump> decodeFlightDump(const std::string& text, const std::string& where);

}  // namespace commhost
