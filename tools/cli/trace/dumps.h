// SPDX-License-Identifier: Apache-2.0
// The flight recorder dumps of one job (rank<N>.json, written by the supervisor), loaded
// for `commhost trace analyze` and `commhost trace export`.
#pragma once

#include <string>
#include <vector>

#include "commhost/flight_dump.h"

namespace commhost::cli::trace {

// One rank's dump (commhost/flight_dump.h) and the file it came from.
struct RankDump : FlightDump {
  std::string path;
};

// Reads every *.json file in `dir` that is a commhost dump; throws InvalidArgument
// naming the directory when there is none, and the file for one that does not parse.
std::vector<RankDump> loadDumps(const std::string& dir);

// One paragraph per group: the first collective where ranks diverge, and what to do.
std::string analyze(const std::vector<RankDump>& dumps);

// A Chrome trace (Perfetto / chrome://tracing): one track per rank, one slice per op.
std::string chromeTrace(const std::vector<RankDump>& dumps);

}  // namespace commhost::cli::trace
