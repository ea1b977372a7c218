// SPDX-License-Identifier: Apache-2.0
// `commhost tune`'s decisions and the configs it writes, apart from the measuring (so
// that the unit tests check them): which backend wins each size, the byte ranges where the
// winner does not change, the config that routes them, and the configs the measuring
// swaps between (one per candidate, listing every candidate, so a swap changes only which
// backend serves the op and never rebuilds one).
//
// A candidate wins a size with the lowest median over the alternating rounds of the
// slowest rank's mean time, among the candidates whose results were right in every round
// (a backend that computed one wrong element is never chosen, however fast).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "commhost/sdk/measured_table.h"
#include "commhost/types.h"

namespace commhost::cli {

struct CandidateTimes {
  std::string backend;
  std::vector<double> roundUs;  // one per round: the slowest rank's mean time per iteration
  int64_t wrong = 0;            // wrong elements over every round's check (all ranks)
};

struct SizeTimes {
  int64_t bytes = 0;                       // the bytes routes count (BenchOp::routedBytes)
  std::vector<CandidateTimes> candidates;  // in the order the config lists them
};

struct OpTimes {
  std::string op;                    // the bench op ("allreduce", "broadcast", "reduce")
  std::vector<OpType> routedOps;     // what the routes name for it
  std::vector<SizeTimes> sizes;      // ascending
  std::vector<std::string> skipped;  // "backend: why it cannot serve the op", not measured
};

// The median of a candidate's rounds.
double medianUs(const CandidateTimes& c);
// The index of the winning candidate of `size`, or -1 when none was right.
int winner(const SizeTimes& size);

struct TunedRange {
  int64_t minBytes = 0;
  int64_t maxBytes = INT64_MAX;  // inclusive; INT64_MAX: no upper bound
  std::string backend;
};
// Consecutive sizes with the same winner, merged: each range runs from just above the
// previous range's largest measured size (0 for the first) to its own largest (no bound
// for the last). Sizes no candidate got right are left to the ranges around them. Empty
// when no size has a winner.
std::vector<TunedRange> tunedRanges(const OpTimes& op);

// The config `originalYaml` (a config file's text) with, for each op and `device`, the
// routes `ranges` names in place of its own routes for that op and device (those naming
// neither a dtype nor a reduce op: they would overlap the new ones), preceded by a
// comment with `header` lines and the table of measured times. Everything else of the
// config is kept (re-emitted, so its comments are not), except that relative plugin_path
// folders are made absolute against `configDir` (the original file's folder; "" leaves
// them), so that the file works wherever it is written.
std::string tunedConfigText(const std::string& originalYaml, const std::string& configDir, DeviceType device,
                            const std::vector<OpTimes>& ops, const std::vector<std::string>& header);

// The config the measuring runs `first` in: `originalYaml` with one route per op of
// `routedOps` on `device` listing `candidates`, `first` first (routes of the same keys
// removed as above, and the original's `tuner:`, which could reorder the list),
// plugin_path folders made absolute as above (the text is loaded from memory).
std::string candidateConfigText(const std::string& originalYaml, const std::string& configDir, DeviceType device,
                                const std::vector<OpType>& routedOps, const std::vector<std::string>& candidates,
                                const std::string& first);

// The measurements as the table the `measured` tuner reads (`tune --table`): a row per
// size of each routed op, a cell per candidate with its median and whether every round of
// it was right.
MeasuredTable measuredTable(const std::vector<OpTimes>& ops, int worldSize, DeviceType device, DType dtype,
                            ReduceOp::Kind reduceOp);

// The table of one op: a row per size, a column per candidate (median us, or "wrong"),
// and the winner. Lines without a trailing newline.
std::vector<std::string> timesTable(const OpTimes& op);

}  // namespace commhost::cli
