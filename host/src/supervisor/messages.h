// SPDX-License-Identifier: Apache-2.0
// The supervisor's cross-rank messages over the group's store, as one versioned codec.
//
// Every message is one line of '|'-separated fields that starts with the version tag and
// the message type: "s1|incident|RANK|K|MS|what". Text fields come last and have '|' and
// newlines blanked, so the split is unambiguous. Decoding is strict: a wrong version, an
// unknown type, a missing field, a number with a sign, spaces, trailing characters or out
// of range is an error naming what is wrong, never a default such as rank 0. A rank that
// reads a line it cannot decode (a peer of another commhost version, a corrupted store)
// skips it and says so in the log.
//
// Messages and where they live (keys under the group's store):
// - incident (kIncidentLog): RANK raised its K-th incident at MS ms of the system clock
//   about `what`; every other rank dumps its flight recorder and acknowledges it.
// - peer lost (kIncidentLog): RANK found PEER lost, because `why`.
// - ack (ackKey(RANK, K), one line per acknowledging rank): RANK dumped for incident K.
// - progress (progressKey(RANK)): the last collective issued (seq and op) and completed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace commhost::supervisor::wire {

constexpr const char* kVersion = "s1";
// Ranks and peers above this are garbage, whatever the group's size.
constexpr int64_t kMaxRank = (int64_t{1} << 24) - 1;
// Longest text field kept (what, why): longer ones are cut, so a line stays small.
constexpr size_t kMaxText = 480;

// Either a value or the reason the input is not one.
template <class T> struct Decoded {
  T value{};
  std::string error;  // empty on success
  explicit operator bool() const { return error.empty(); }
};

struct Incident {
  int rank = 0;
  int64_t number = 0;      // K: the rank's K-th incident, from 1
  int64_t raisedAtMs = 0;  // system clock, ms since the epoch
  std::string what;
};

struct PeerLost {
  int rank = 0;  // who found it
  int peer = 0;
  std::string why;
};

struct Progress {
  uint64_t issued = 0;
  std::string issuedOp;  // an op name, or "none" while issued == 0
  uint64_t completed = 0;
};

// One line of the incident log: either kind.
struct LogLine {
  enum class Kind { Incident, PeerLost } kind = Kind::Incident;
  Incident incident;
  PeerLost peerLost;
};

// Each encode returns the line with its trailing '\n' (log and ack keys are appended to).
std::string encode(const Incident& m);
std::string encode(const PeerLost& m);
std::string encodeAck(int rank);
std::string encode(const Progress& m);  // no newline: the value of a key of its own

// `line` without its '\n'.
Decoded<LogLine> decodeLogLine(const std::string& line);
Decoded<int> decodeAck(const std::string& line);
Decoded<Progress> decodeProgress(const std::string& value);

// Splits an appended-to value into its lines (the last may lack its '\n').
std::vector<std::string> splitLines(const std::string& text);

}  // namespace commhost::supervisor::wire
