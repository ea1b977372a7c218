// SPDX-License-Identifier: Apache-2.0
// commhost bench: nccl-tests for every backend. Joins the job from the environment
// (commhost run sets it), sweeps message sizes for each op and prints, from rank 0, the
// nccl-tests table (and JSON lines with --json FILE). Exits 1 when any result was wrong.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>

#include "../commands.h"
#include "bench_memory.h"
#include "bench_ops.h"
#include "bookkeeping.h"
#include "commhost/errors.h"
#include "inject.h"
#include "measure.h"
#include "plan.h"
#include "report.h"
#include "swap.h"

namespace commhost::cli {
namespace {

// What is about to be measured, printed before the job is joined, so that any later
// error (a store that cannot be reached, a backend that fails) follows it.
void printHeader(std::FILE* out, const BenchArgs& a, const BenchPlan& plan, int worldSize, const Device& device) {
  const std::string where = device.type == DeviceType::CPU
                                ? "cpu tensors"
                                : "cuda tensors (rank 0 on " + device.str() + "; each op timed to its stream's end)";
  std::fprintf(out, "# commhost bench: %d ranks, config %s, %s\n", worldSize, plan.configSource.c_str(), where.c_str());
  char iters[96];
  if (plan.fixedIters) std::snprintf(iters, sizeof iters, "iters %d", plan.iters);
  else std::snprintf(iters, sizeof iters, "iters >= %d filling %g s", plan.iters, plan.minTimeS);
  char warmup[64];
  if (plan.settleS > 0)
    std::snprintf(warmup, sizeof warmup, "warmup %d (the first size settles %g s)", a.warmup, plan.settleS);
  else std::snprintf(warmup, sizeof warmup, "warmup %d", a.warmup);
  std::fprintf(
      out, "# dtype %s, redop %s, root %d, %s%s, %s, %s, %s%s\n", a.dtype.c_str(), a.redop.c_str(), a.root, iters,
      plan.repeat > 1 ? (", " + std::to_string(plan.repeat) + " rounds (the median shown)").c_str() : "", warmup,
      plan.placements.size() > 1 ? "out-of-place and in-place"
      : plan.placements[0]       ? "in-place"
                                 : "out-of-place",
      plan.check ? "checked" : "unchecked", plan.timeEach ? "" : ", one clock read per timed loop (no percentiles)");
  const auto bytes = [](int64_t b) {
    const std::string text = formatSize(b);
    return text.find_first_not_of("0123456789") == std::string::npos ? text + " B" : text;
  };
  std::fprintf(out, "# sizes %s to %s (%zu sizes)%s\n", bytes(plan.sizes.front()).c_str(),
               bytes(plan.sizes.back()).c_str(), plan.sizes.size(),
               a.backend.empty() ? "" : (", --backend " + a.backend + " for the ops under test").c_str());
  for (const auto& [op, route] : plan.routes) std::fprintf(out, "# %s -> %s\n", op.c_str(), route.c_str());
  for (const auto& [op, why] : plan.skipped)
    std::fprintf(out, "# skipped %s: --backend %s %s\n", op.c_str(), a.backend.c_str(), why.c_str());
  std::fflush(out);
}

int measure(const BenchPlan& plan, ProcessGroup& pg, BenchMemory& memory, Injector& inject, Report& report,
            Swapper* swapper) {
  const bool leader = pg.rank() == 0;
  // Progress only to a terminal: under `commhost run` stderr is the rank's log.
  const bool progress = leader && plan.sizes.size() > 8 && ::isatty(STDERR_FILENO);
  StoreRounds rounds(pg);
  MeasureContext context{plan, pg, memory, inject, swapper, rounds, plan.settleS <= 0};
  int64_t wrongTotal = 0;
  for (size_t o = 0; o < plan.ops.size(); ++o) {
    const std::string& name = plan.ops[o];
    std::vector<std::unique_ptr<BenchOp>> columns;
    for (bool inPlace : plan.placements) {
      BenchParams params = plan.params;
      params.inPlace = inPlace;
      columns.push_back(makeBenchOp(name, pg, params, memory));
    }
    double busSum = 0;
    int measured = 0;
    report.beginOp(name, plan.routes[o].second);
    for (int64_t bytes : (name == "barrier" ? std::vector<int64_t>{0} : plan.sizes)) {
      if (progress) std::fprintf(stderr, "[bench] %s %lld bytes\r", name.c_str(), static_cast<long long>(bytes));
      ResultLine line;
      for (size_t c = 0; c < columns.size(); ++c) {
        BenchOp& op = *columns[c];
        const std::string what = name + " at " + std::to_string(bytes) + " bytes" +
                                 (plan.placements[c] ? "" : " out-of-place");
        Measurement m = measureCell(context, op, bytes, what);
        m.inPlace = plan.placements[c];
        if (plan.check) wrongTotal += m.wrong;
        busSum += m.busbw;
        ++measured;
        line.results.push_back(m);
        line.size = op.size();
        line.count = op.count();
        line.redop = op.usesReduceOp() ? reduceOpName(plan.params.reduceOp.kind) : "none";
        line.root = op.usesRoot() ? plan.params.root : -1;
      }
      line.op = name;
      line.dtype = dtypeName(plan.params.dtype);
      line.device = deviceTypeName(plan.params.device);
      report.line(line);
    }
    report.endOp(name, measured ? busSum / measured : 0);
  }
  if (progress) std::fprintf(stderr, "%60s\r", "");
  if (wrongTotal > 0) {
    if (leader)
      std::fprintf(stderr, "commhost bench: %lld wrong elements; see the #wrong column\n",
                   static_cast<long long>(wrongTotal));
    return 1;
  }
  return 0;
}

int bench(const BenchArgs& a) {
  // Everything that can be checked without the job is, so a typo fails at once on every
  // rank instead of after the store started (or timed out).
  const LaunchInfo launch = detectLaunch();
  BenchPlan plan = planBench(a, launch.worldSize);
  resolveRoutes(a, launch, plan);
  const bool leader = launch.rank == 0;
  // Before the store too: a rank without a usable GPU fails at once, with CUDA's reason.
  std::unique_ptr<BenchMemory> memory = openBenchMemory(plan.params.device, launch.rank, launch.localRank);
  Report report(leader, plan.placements.size() > 1, a.jsonFile);
  if (leader) printHeader(a.jsonFile == "-" ? stderr : stdout, a, plan, launch.worldSize, memory->device());
  Injector inject(plan.injections);
  std::unique_ptr<Swapper> swapper;
  if (a.swapEvery > 0) swapper = std::make_unique<Swapper>(loadSwapConfigs(a.configs, plan.sets), a.swapEvery);
  InitOptions init;
  init.configPath = launch.configPath;
  init.overrides.set = plan.sets;
  auto pg = commhost::init(init);
  try {
    const int rc = measure(plan, *pg, *memory, inject, report, swapper.get());
    if (swapper && leader) swapper->print(a.jsonFile == "-" ? stderr : stdout);
    if (leader) printShadows(a.jsonFile == "-" ? stderr : stdout, pg->shadowReport(std::chrono::seconds(30)));
    if (leader) printLive(a.jsonFile == "-" ? stderr : stdout, *pg);
    return rc;
  } catch (const Error& e) {
    // Report before the group is torn down: a store-serving rank keeps serving its peers
    // for a while on the way out, and the launcher may stop it before that ends.
    std::fprintf(stderr, "commhost: %s\n", e.what());
    std::fflush(stderr);
    return 1;
  }
}

}  // namespace

void addBenchCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "nccl-tests style sweep of one op (or all) through the configured routes");
  static BenchArgs a;
  std::string opList;
  for (const auto& n : benchOpNames()) opList += n + "|";
  cmd->add_option("--op", a.op, opList + "all")->capture_default_str();
  auto* sizes = cmd->add_option("--sizes", a.sizes,
                                "MIN:MAX message sizes (8, 64K, 1M, 64MiB ...), or a list: 8,64K,1M")
                    ->capture_default_str();
  cmd->add_option("-b,--min-bytes", a.minBytes, "Smallest size, as nccl-tests' -b (with -e instead of --sizes)");
  cmd->add_option("-e,--max-bytes", a.maxBytes, "Largest size, as nccl-tests' -e");
  auto* factor = cmd->add_option("-f,--factor", a.factor, "Multiply the size by this between rows")
                     ->capture_default_str();
  auto* step = cmd->add_option("-i,--step", a.step, "Add this size between rows instead of multiplying");
  cmd->add_option("--device", a.device,
                  "cpu, or cuda: tensors on each rank's local GPU (LOCAL_RANK mod the visible devices), filled "
                  "and checked through host copies, each iteration timed to the stream's synchronize")
      ->capture_default_str();
  cmd->add_option("--dtype", a.dtype, "f32 f64 f16 bf16 i8 u8 i32 i64")->capture_default_str();
  cmd->add_option("--redop", a.redop, "sum product min max avg band bor bxor")->capture_default_str();
  cmd->add_option("--root", a.root, "Root of rooted ops")->capture_default_str();
  auto* iters = cmd->add_option("-n,--iters", a.iters,
                                "Timed iterations per size: exactly N (as nccl-tests); without -n, at least N and "
                                "enough to fill --min-time")
                    ->capture_default_str();
  auto* minTime = cmd->add_option(
                         "--min-time", a.minTime,
                         "Seconds of timed iterations per size (per round) when -n is not given, or with -n as a floor")
                      ->capture_default_str();
  cmd->add_option("--repeat", a.repeat,
                  "K timed rounds per size, each after a barrier; the row shows the median round's mean and flags a "
                  "size whose rounds disagree by over 25%")
      ->capture_default_str();
  cmd->add_option("--timing", a.timing,
                  "each: every iteration clocked on its own (the table's p50/p99); loop: one clock read per timed "
                  "loop, the mean only, as nccl-tests and the peers in tools/compare-peers time it (an 8 B op then "
                  "carries no clock read of the bench's own; a row is flagged unstable only across --repeat rounds)")
      ->capture_default_str();
  cmd->add_option("-w,--warmup", a.warmup, "Untimed iterations per size")->capture_default_str();
  cmd->add_option("--settle", a.settle,
                  "Seconds of untimed runs of the first size before the first timed loop, so the job's start-up "
                  "(threads settling on CPUs, fresh connections) stays out of the figures; 0: none. Not with "
                  "--swap-every or --inject, which count runs")
      ->capture_default_str();
  cmd->add_flag("--out-of-place", a.outOfPlace, "Separate input and output buffers where the op allows it");
  cmd->add_flag("--inplace", a.inPlace, "In-place buffers (the default)");
  cmd->add_flag("--side-by-side", a.sideBySide,
                "Measure out-of-place and in-place at each size and print them side by side, as nccl-tests does");
  cmd->add_flag("--check", a.check, "Verify every result (per-rank verifiable data); fills #wrong");
  cmd->add_option("-c", a.checkLevel, "nccl-tests' check: -c 1 is --check, -c 0 (the default) does not check")
      ->type_name("0|1");
  cmd->add_option("--json", a.jsonFile,
                  "Also write one JSON object per measurement to FILE (rank 0; - for standard output)")
      ->type_name("FILE");
  cmd->add_option("--backend", a.backend,
                  "Route the ops under test (only those) to this configured backend; ops it cannot serve are "
                  "skipped")
      ->type_name("NAME");
  cmd->add_option("--set", a.sets, "Override a config key: --set backends.gloo.options.threads=2 (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--inject", a.injections,
                  "Fault injection (repeatable): hang:RANK@SEQ | exit:RANK@SEQ | slow:RANK@SEQ:MS | mismatch:RANK@SEQ")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--swap-every", a.swapEvery,
                  "Hot-swap the job's config (ProcessGroup::reconfigure) every N runs of the op, cycling through "
                  "--configs; prints each swap's phase times and p50/p99")
      ->type_name("N");
  cmd->add_option("--configs", a.configs, "The configs --swap-every cycles through: a.yaml,b.yaml")->type_name("FILES");
  cmd->footer(
      "Examples (run it under the launcher):\n"
      "  commhost run -n 4 -c configs/gloo.yaml -- commhost bench --op all --check\n"
      "  commhost run -n 2 -c configs/shm.yaml -- commhost bench -b 8 -e 128M -f 2 -n 20 -w 5 -c 1 --side-by-side\n"
      "  commhost run -n 2 -c configs/shm.yaml -- commhost bench --op all --backend shm --json shm.jsonl\n"
      "  commhost run -n 8 -c nccl.yaml -- commhost bench --device cuda --op all --check\n"
      "  commhost run -n 4 -c configs/gloo.yaml -- commhost bench --sizes 4K --iters 200 --check --swap-every 10 \\\n"
      "      --configs configs/shm.yaml,configs/gloo.yaml\n"
      "Bookkeeping (barriers, timings, #wrong) goes through the store, never the routes.");
  cmd->callback([sizes, factor, step, iters, minTime] {
    a.itersGiven = iters->count() > 0;
    a.minTimeGiven = minTime->count() > 0;
    a.sizesGiven = sizes->count() > 0;
    a.factorGiven = factor->count() > 0;
    a.stepGiven = step->count() > 0;
    const int rc = bench(a);
    if (rc) throw CLI::RuntimeError(rc);
  });
}

}  // namespace commhost::cli
