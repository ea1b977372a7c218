// SPDX-License-Identifier: Apache-2.0
// What `commhost bench` will measure, settled before any store starts: every argument
// is checked here (a typo fails at once, even under `commhost run`), the config is read
// to resolve `--backend` and to name each op's route in the header.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bench_ops.h"
#include "commhost/process_group.h"
#include "inject.h"

namespace commhost::cli {

struct BenchArgs {
  std::string op = "allreduce";
  std::string sizes = "8:64M";
  std::string minBytes, maxBytes;  // -b / -e (nccl-tests), each side of the default sweep
  double factor = 2;
  std::string step;
  std::string device = "cpu";  // --device cpu|cuda
  std::string dtype = "f32";
  std::string redop = "sum";
  int root = 0;
  int iters = 20;  // timed iterations per size: exactly this with -n, else at least this
  int warmup = 5;
  double minTime = 0.1;         // --min-time S: without -n (or with --min-time), time each size this long at least
  double settle = 0.2;          // --settle S: untimed runs of the first size before anything is timed
  int repeat = 1;               // --repeat K: K timed rounds per size; the row shows the median round
  std::string timing = "each";  // --timing each|loop: a clock read per iteration, or per timed loop
  bool outOfPlace = false;
  bool inPlace = false;
  bool sideBySide = false;
  bool check = false;
  std::string checkLevel;  // -c 0|1 (nccl-tests); empty when not given
  std::string jsonFile;
  std::string backend;
  std::vector<std::string> sets;
  std::vector<std::string> injections;
  int swapEvery = 0;    // --swap-every N: hot swap every N runs of the op (0: never)
  std::string configs;  // --configs a.yaml,b.yaml: what --swap-every cycles through
  // Which options the command line gave (conflicts are about what was written).
  bool sizesGiven = false, factorGiven = false, stepGiven = false, itersGiven = false, minTimeGiven = false;
};

struct BenchPlan {
  std::vector<std::string> ops;
  std::vector<std::pair<std::string, std::string>> skipped;  // op, why --backend cannot serve it
  std::vector<int64_t> sizes;
  BenchParams params;
  std::vector<bool> placements;  // inPlace per column: {true}, {false} or {false, true}
  bool check = false;
  int iters = 20, warmup = 5, repeat = 1;
  bool fixedIters = false;  // -n without --min-time: exactly `iters`, as nccl-tests
  double minTimeS = 0.1;
  double settleS = 0.2;  // 0 with --swap-every or --inject: their run counts stay as given
  // --timing each: every iteration clocked (percentiles); loop: one clock read per timed
  // loop, as the peers and nccl-tests time it (the mean only, no per-iteration read).
  bool timeEach = true;
  std::vector<Injection> injections;
  // Filled by resolveRoutes.
  std::string configSource;
  std::vector<std::string> sets;                            // --set lines for init, --backend's routes included
  std::vector<std::pair<std::string, std::string>> routes;  // op, where the route sends it
};

// Throws InvalidArgument naming the flag and what to write instead. Needs no store.
BenchPlan planBench(const BenchArgs& a, int worldSize);
// Reads the config as init() will (same path, environment and --set), applies --backend
// to the ops under test only and validates the result; still no store. The routes named
// are the table this rank's group will build (a config's tuner applied, for the world
// size and ranks on this host `launch` gives).
void resolveRoutes(const BenchArgs& a, const LaunchInfo& launch, BenchPlan& plan);

}  // namespace commhost::cli
