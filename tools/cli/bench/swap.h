// SPDX-License-Identifier: Apache-2.0
// `commhost bench --swap-every N --configs a.yaml,b.yaml`: hot swaps between measured
// iterations (ProcessGroup::reconfigure), every N runs of the op on every rank alike,
// cycling through the configs; each swap's phase times, then p50/p99 of the totals.
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commhost/process_group.h"

namespace commhost::cli {

// Loads every file of "a.yaml,b.yaml" as init() loads the job's config (with `sets`), so
// a bad file fails before the job starts. Throws InvalidArgument / ConfigError naming it.
std::vector<std::shared_ptr<const Config>> loadSwapConfigs(const std::string& list,
                                                           const std::vector<std::string>& sets);

class Swapper {
 public:
  Swapper(std::vector<std::shared_ptr<const Config>> configs, int every);
  // Before run `run` (counted from 0, alike on every rank): when it is a multiple of
  // `every` (not 0), swaps to the config after the one the group runs now (the first of
  // the list when it runs none of them). Both follow from what every rank has alike, so a
  // swap that failed on some ranks and not reached by others (a rank lost during it) is
  // tried again, with the same config on all, when the step is run again after a shrink.
  void beforeRun(ProcessGroup& pg, long run);
  // The same, counting the runs itself (bench, which does not run a step again).
  void beforeRun(ProcessGroup& pg) { beforeRun(pg, runs_++); }
  // Rank 0: one line per swap (its phase times on this rank), then p50/p99 of the totals.
  void print(std::FILE* out) const;

 private:
  struct Done {
    std::string source;
    ReconfigureReport report;
  };
  std::vector<std::shared_ptr<const Config>> configs_;
  int every_;
  long runs_ = 0;
  std::vector<Done> done_;
};

}  // namespace commhost::cli
