// SPDX-License-Identifier: Apache-2.0
// The bench's output, written by rank 0 only: the nccl-tests table (one placement, with
// the median and p99 per iteration after the mean, or out-of-place and in-place side by
// side in nccl-tests' columns), a "# !" line under each row whose iterations spread
// widely, and, with --json FILE, one JSON object per measurement in FILE (no launcher
// prefix: the file is written by the rank itself).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "commhost/process_group.h"
#include "timing.h"

namespace commhost {
struct ShadowRecord;
}

namespace commhost::cli {

struct Measurement {
  bool inPlace = true;
  // timeUs: the mean per iteration (with --repeat K, the median of the K rounds' means),
  // the slowest rank's, as nccl-tests reports it; algbw and busbw follow from it.
  double timeUs = 0, algbw = 0, busbw = 0;
  LoopStats stats;                   // over every timed iteration, the slowest rank's per figure
  bool percentiles = true;           // false with --timing loop: stats holds the mean only
  int iters = 0;                     // timed iterations per round
  std::vector<double> roundMeansUs;  // --repeat K: each round's mean (K > 1 only)
  std::string unstable;              // why the figure is not to be trusted, or ""
  int64_t wrong = -1;                // -1: not checked
};

struct ResultLine {
  std::string op;
  int64_t size = 0, count = 0;
  std::string dtype, redop;    // redop "none" for ops without one
  std::string device = "cpu";  // where the tensors were: "cpu" or "cuda"
  int root = -1;               // -1 for unrooted ops
  std::vector<Measurement> results;
};

class Report {
 public:
  // Opens (truncates) jsonPath when given; throws InvalidArgument naming it if it cannot.
  Report(bool leader, bool sideBySide, const std::string& jsonPath);
  ~Report();
  Report(const Report&) = delete;
  Report& operator=(const Report&) = delete;

  void beginOp(const std::string& op, const std::string& route);
  void line(const ResultLine& line);
  void endOp(const std::string& op, double avgBusbw);

 private:
  bool leader_, sideBySide_;
  bool unstableInOp_ = false;
  std::FILE* json_ = nullptr;
  std::string jsonPath_;
};

// "# shadow: allreduce on shm, shadow gloo, up to 1024 bytes: 22/22 agree; the shadow took 1.52x the
// time" per op and size class this rank compared (a route with `shadow:`), then the first
// disagreement or failure.
void printShadows(std::FILE* out, const std::vector<ShadowRecord>& records);
// What live routing (tune: live) moved during the run, as the group's table says now.
void printLive(std::FILE* out, const ProcessGroup& pg);

}  // namespace commhost::cli
