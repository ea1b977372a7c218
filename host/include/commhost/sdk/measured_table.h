// SPDX-License-Identifier: Apache-2.0
// MeasuredTable: what `commhost tune --table FILE` measured, and what the built-in tuner
// plugin `measured` (plugins/measured_tuner) reads. One writer (toJson) and one reader
// (parseMeasuredTable) of a versioned JSON format, so neither side parses the other's
// text by hand; a tuner of a user's own can read the same file through them.
//
// A table holds one job's measurements: its world size, device, dtype and reduce op, and
// per op the measured sizes with each candidate's median time over the alternating rounds
// and whether its results were right in every round.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "commhost/export.h"
#include "commhost/types.h"

namespace commhost {

struct COMMHOST_API MeasuredTable {
  static constexpr int kVersion = 1;  // of the JSON format; a reader refuses another

  struct Cell {
    std::string backend;  // the name under `backends:` in the config tuned
    double medianUs = 0;  // median over the rounds of the slowest rank's mean time per call
    bool right = true;    // every round's results were right (a wrong one is never chosen)
  };
  struct Row {
    int64_t bytes = 0;  // the bytes the dispatcher routes by (one rank's block for split ops)
    std::vector<Cell> cells;
  };
  struct Op {
    OpType op = OpType::Allreduce;  // one routed op (tune's sendrecv gives send and recv rows alike)
    std::vector<Row> rows;          // ascending bytes
  };

  int worldSize = 1;
  DeviceType device = DeviceType::CPU;
  DType dtype = DType::Float32;
  ReduceOp::Kind reduceOp = ReduceOp::Sum;
  std::vector<Op> ops;

  // The JSON text of the table ({"format": "commhost-measured-table", "version": 1, ...}).
  std::string toJson() const;
  // The candidate of `candidates` fastest over the rows of `op` in [minBytes, maxBytes]
  // (their times summed; with no row there, the nearest row below, else above), among
  // those measured right at all of them; "" when the table has no row for `op` or measured
  // none of the candidates there.
  std::string fastest(OpType op, int64_t minBytes, int64_t maxBytes, const std::vector<std::string>& candidates,
                      double* timeUs = nullptr) const;
  // The summed time of `backend` over the same rows as fastest(); < 0 when not measured there.
  double timeOf(OpType op, int64_t minBytes, int64_t maxBytes, const std::string& backend) const;
};

// Reads what toJson() wrote. Throws ConfigError naming `source` when the text is not such
// a table, or when its version is not MeasuredTable::kVersion (both versions named).
COMMHOST_API MeasuredTable parseMeasuredTable(const std::string& text, const std::string& source);

}  // namespace commhost
