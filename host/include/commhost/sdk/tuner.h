// SPDX-License-Identifier: Apache-2.0
// Tuner: a plugin that orders a route's backends by what it knows of this machine (since
// ABI 3.1), as NCCL's tuner plugins choose algorithms and protocols.
//
// A config names at most one (`tuner: { plugin: NAME, options: {...} }`). When a group
// builds its route table (at init, at each hot swap, in each subgroup), the host creates
// the tuner, asks it one question per (op, device, dtype, reduce op, size class) whose
// route lists two or more backends that serve it, and destroys it. The table that comes
// out is the one the dispatcher uses, so the tuner costs nothing per call: a lookup stays
// an array index and a scan of a few byte ranges. A route with one backend, and a cell
// only one of a route's backends serves, is never asked about.
//
// Size classes are powers of two of the bytes the dispatcher routes by (one rank's block
// for the ops that split their message): [0, 1], [2, 3], [4, 7], ... each cut to the
// route's own byte range. Adjacent classes with the same answer merge into one segment.
// An op without data (barrier) is asked once for its route's whole range.
//
// Agreement: every rank of a group builds its own table, and all of them must route a
// call alike or the ranks would call different backends and hang. A tuner must answer
// from what every rank shares (the op, sizes and world size of the query, its options, a
// file every host has the same copy of), never from rank-local state. The group compares
// the tables' fingerprints when it forms, at each hot swap's vote and in each membership
// round (shrink, grow, join), and refuses a table that differs, naming the ranks.
//
// Threading: create, order() and destruction all happen on the thread that builds the
// table, one tuner per build; a tuner need not be thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "commhost/logging.h"
#include "commhost/sdk/abi.h"
#include "commhost/types.h"

namespace commhost {

constexpr uint32_t kTunerContextMagic = 0x43544843;  // "CHTC"
constexpr uint32_t kTuneQueryMagic = 0x51544843;     // "CHTQ"

// One question: which backend should serve these calls. Filled by the host; read it
// through the reference given (a later minor may append fields: check `size`).
struct TuneQuery {
  uint32_t size = sizeof(TuneQuery);
  uint32_t magic = kTuneQueryMagic;
  uint32_t abiVersion = kAbiVersion;
  OpType op = OpType::Allreduce;
  DeviceType device = DeviceType::CPU;
  bool hasDtype = false;  // false for ops without data (barrier): `dtype` means nothing
  DType dtype = DType::Float32;
  bool hasReduceOp = false;  // false for ops that do not reduce: `reduceOp` means nothing
  ReduceOp::Kind reduceOp = ReduceOp::Sum;
  int64_t minBytes = 0;  // the size class (inclusive), in the bytes the dispatcher routes by
  int64_t maxBytes = 0;
  int worldSize = 1;  // ranks in the group
  // Ranks of the job on this host (LOCAL_WORLD_SIZE, at most worldSize; worldSize when the
  // launcher does not say). Per host: where hosts run different numbers of ranks, a tuner
  // that answers by it answers the ranks differently, and the group refuses to form.
  int localWorldSize = 1;
};

// A backend the route lists that serves the query's calls.
struct TuneCandidate {
  std::string backend;  // its name under `backends:` in the config
  std::string plugin;   // the plugin it is made from ("gloo", "shm", ...)
};

class Tuner {
 public:
  virtual ~Tuner() = default;
  // Puts `candidates` (two or more, in the route's order) in order of preference: the
  // first serves the query's calls. Only reorder: a list that is not a permutation of the
  // one given is refused (PluginError naming the tuner). Leave it as it is to keep the
  // config's order. Throw commhost::Error to fail the table's build, saying why.
  virtual void order(const TuneQuery& query, std::vector<TuneCandidate>& candidates) = 0;
};

// What a tuner factory gets. Filled by the host; valid during the factory call only.
struct TunerContext {
  uint32_t size = sizeof(TunerContext);
  uint32_t magic = kTunerContextMagic;
  uint32_t abiVersion = kAbiVersion;
  std::string groupName;           // the group whose table is built ("main", "main/sub1", ...)
  int rank = 0;                    // this rank in that group
  int worldSize = 1;               // ranks in that group
  int localWorldSize = 1;          // ranks of the job on this host (see TuneQuery)
  std::shared_ptr<Logger> logger;  // tagged with the plugin, group and rank
};

}  // namespace commhost
