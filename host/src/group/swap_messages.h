// SPDX-License-Identifier: Apache-2.0
// Internal: the values a hot swap's ranks exchange through the group store (the protocol
// of swap_attempt.h). Each is one versioned JSON object, written and read by this file
// alone: no rank parses another's text, and a value from a commhost speaking another
// version of the protocol is refused by name instead of misread.
#pragma once

#include <cstdint>
#include <string>

#include "commhost/errors.h"
#include "commhost/store.h"

namespace commhost::swap {

// Bumped when a field changes meaning; ranks of one job run one commhost build.
constexpr int kProtocolVersion = 1;

// check/<rank>: whether this rank can swap to the config, and what it loaded.
struct CheckVote {
  enum class Verdict : uint8_t {
    Ok,         // valid here
    BadConfig,  // the config (or loading it) failed here
    BadPlugin,  // a changed plugin file could not be reloaded
    BadShadow,  // onlyIfShadowAgrees refused: the new backend has no clean shadow record
  };
  Verdict verdict = Verdict::Ok;
  uint64_t hash = 0;    // Config::hash (Ok): what ranks must agree on
  uint64_t routes = 0;  // the new route table's fingerprint (Ok): a tuner's answers must agree too
  std::string builds;   // "name=file hash,..." of the config's plugins; "-" without reloadPlugins (Ok)
  std::string source;   // where the config came from, for messages (Ok)
  std::string why;      // the refusal (not Ok)
};

// report/<rank>: how this rank's drain and build phases ended.
struct BuildReport {
  enum class Kind : uint8_t {
    Ok,
    Failed,     // this rank's own build or drain failed
    Abandoned,  // stopped because another rank reported failure first
  };
  Kind kind = Kind::Ok;
  ErrorCode code = ErrorCode::Plugin;  // Failed: the error's code
  std::string why;                     // Failed, Abandoned
};

// outcome: one decision for every rank; the first rank to write it decides.
struct Decision {
  bool commit = false;
  int rank = -1;    // the global rank that decided
  std::string why;  // a rollback's reason
};

Bytes encode(const CheckVote& vote);
Bytes encode(const BuildReport& report);
Bytes encode(const Decision& decision);
// Throw StoreError naming `key` when the value is not such a message of this version.
CheckVote decodeCheckVote(const Bytes& value, const std::string& key);
BuildReport decodeBuildReport(const Bytes& value, const std::string& key);
Decision decodeDecision(const Bytes& value, const std::string& key);

}  // namespace commhost::swap
