// SPDX-License-Identifier: Apache-2.0
// `commhost top`'s view: rates over the time between two readings of the ranks' records
// (commhost/job_status.h) — per rank and per (group, op, backend): ops/s, bytes/s, bus
// bandwidth and p50/p99 latency of the ops completed in between — and its rendering.
// Pure functions of the two readings, so that the unit tests check them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "commhost/job_status.h"

namespace commhost::cli {

struct TopRow {
  std::string key;  // "rank 2" or "main allreduce gloo"
  int rank = -1;    // for a rank's row
  uint64_t generation = 0;
  double opsPerSecond = 0;
  double bytesPerSecond = 0;      // each rank's own buffers
  double busBytesPerSecond = 0;   // bytesPerSecond times nccl-tests' bus factor of the op
  double p50Us = -1, p99Us = -1;  // -1: no op completed in between
  int inFlight = 0;
  std::string alert;  // "lost 3", "silent 9 s", "oldest allreduce 1041 for 12 s"
};

struct TopFrame {
  std::vector<TopRow> ranks;  // one per rank in `now`
  std::vector<TopRow> ops;    // one per (group, op, backend), summed over ranks
};

// The ops completed between `before` and `now` (matched by rank and pid: a restarted rank
// counts from its new start), over `seconds`.
TopFrame topFrame(const std::vector<ProcessStatus>& before, const std::vector<ProcessStatus>& now, double seconds,
                  int64_t nowUnixMs);
// The latency at quantile q (0..1) of histogram counts (per bucket, not cumulative; the
// last is +Inf), read linearly within its bucket; -1 when the counts are all zero.
double quantileUs(const std::vector<uint64_t>& counts, const std::vector<int64_t>& boundsUs, double q);
// The frame as text: a header line, then the rank table and the op table.
std::string renderTop(const TopFrame& frame, const std::string& summary);

}  // namespace commhost::cli
