// SPDX-License-Identifier: Apache-2.0
// What `commhost status` says about a job from its ranks' records (commhost/job_status.h):
// a summary line first ("4 ranks ok", or who is behind, silent or lost), then details, and
// for --watch the events not printed yet. Pure functions of the records and the time, so
// that the unit tests check them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "commhost/job_status.h"

namespace commhost::cli {

struct ViewOptions {
  int64_t nowUnixMs = 0;
  // A group's ranks that wait in an op this long while another rank has not issued it make
  // that rank "behind" (shorter waits are ordinary skew between ranks).
  double behindAfterSeconds = 2.0;
  int expectedRanks = 0;  // the job's world (0: the ranks that published)
};

// What the summary names, one per rank and problem.
struct Problem {
  int rank = -1;     // the job's rank it is about (-1: the store)
  std::string kind;  // "missing", "silent", "behind", "lost"
  std::string text;  // as the summary says it
};
std::vector<Problem> problems(const std::vector<ProcessStatus>& ranks, const ViewOptions& o);

// One line: "4 ranks ok (group main generation 0, allreduce seq 1041)", or the problems
// joined by "; " ("rank 2 behind by 1 op in allreduce seq 50 for 12 s (ranks 0, 1 and 3
// wait)", "rank 3 silent for 9 s", "rank 1 reports peer 3 lost: ...").
std::string summaryLine(const std::vector<ProcessStatus>& ranks, const ViewOptions& o);
// Per group, then per rank: what the record says, as aligned lines.
std::string details(const std::vector<ProcessStatus>& ranks, const ViewOptions& o);
// "HH:MM:SS rank R kind: text" for each event whose id is above what `seen` holds for its
// process (host and pid: a restarted rank counts its ids anew); updates seen.
std::vector<std::string> newEvents(const std::vector<ProcessStatus>& ranks, std::map<std::string, uint64_t>& seen);

}  // namespace commhost::cli
