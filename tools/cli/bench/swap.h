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
  // Before each run of the measured op: every `every` runs, swaps to the next config.
  void beforeRun(ProcessGroup& pg);
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
  size_t next_ = 0;
  bool started_ = false;
  std::vector<Done> done_;
};

}  // namespace commhost::cli
