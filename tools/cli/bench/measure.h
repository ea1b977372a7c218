// SPDX-License-Identifier: Apache-2.0
// How `commhost bench` (and `commhost tune`, which compares backends with it) measures one
// cell: an op at one size and placement, settled once per run, then warmup, timed
// iterations (each clocked on its own), the check on fresh data after the clock stopped,
// and the ranks' agreement on the slowest rank's figures, over the store (bookkeeping.h).
#pragma once

#include <cstdint>
#include <string>

#include "bench_ops.h"
#include "bookkeeping.h"
#include "inject.h"
#include "plan.h"
#include "report.h"
#include "swap.h"

namespace commhost::cli {

// What every measured cell of one bench run shares.
struct MeasureContext {
  const BenchPlan& plan;
  ProcessGroup& pg;
  BenchMemory& memory;
  Injector& inject;
  Swapper* swapper;
  // The run's one sequence of store rounds: their keys are numbered in it, so every cell
  // of a run, whatever its op, goes through the same one.
  StoreRounds& rounds;
  bool settled;  // the job settled (--settle) before its first cell
};

// One column of one result line: `op` at `bytes`, `what` naming it in errors.
Measurement measureCell(MeasureContext& c, BenchOp& op, int64_t bytes, const std::string& what);

}  // namespace commhost::cli
