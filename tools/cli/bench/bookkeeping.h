// SPDX-License-Identifier: Apache-2.0
// The bench's own coordination (before each timed loop, agreeing on the slowest rank's
// warmup time, which is also the barrier; then on its figures and the sum of #wrong) over
// the job's store, never through the
// user's routes: a backend that serves one op can be measured, and a backend that
// computes wrong results cannot also miscount them. Outside the timed region only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "commhost/process_group.h"
#include "timing.h"

namespace commhost::cli {

class StoreRounds {
 public:
  explicit StoreRounds(ProcessGroup& pg) : pg_(pg) {}
  // Every rank calls the same rounds in the same order. `what` names the round in errors
  // ("before the timed loop of allreduce at 1024 bytes").
  struct Agreed {
    LoopStats slowest;  // per statistic, the slowest rank's
    int64_t sumWrong = 0;
  };
  Agreed agree(const LoopStats& mine, int64_t wrong, const std::string& what);
  // The largest of every rank's `value`; also a barrier.
  double agreeMax(double value, const std::string& what);

 private:
  // Publishes `mine` under this round's key and returns every rank's value, by rank.
  std::vector<std::string> exchange(const std::string& mine, const std::string& what);

  ProcessGroup& pg_;
  uint64_t round_ = 0;
};

}  // namespace commhost::cli
