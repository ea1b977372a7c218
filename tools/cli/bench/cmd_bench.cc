// SPDX-License-Identifier: Apache-2.0
// commhost bench: nccl-tests for every backend. Joins the job from the environment
// (commhost run sets it), sweeps message sizes for each op and prints, from rank 0, the
// nccl-tests table (and JSON lines with --json FILE). Exits 1 when any result was wrong.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>

#include "../commands.h"
#include "bench_memory.h"
#include "bench_ops.h"
#include "bookkeeping.h"
#include "commhost/errors.h"
#include "commhost/fast_clock.h"
#include "inject.h"
#include "plan.h"
#include "report.h"
#include "swap.h"
#include "timing.h"

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
      out, "# dtype %s, redop %s, root %d, %s%s, %s, %s, %s\n", a.dtype.c_str(), a.redop.c_str(), a.root, iters,
      plan.repeat > 1 ? (", " + std::to_string(plan.repeat) + " rounds (the median shown)").c_str() : "", warmup,
      plan.placements.size() > 1 ? "out-of-place and in-place"
      : plan.placements[0]       ? "in-place"
                                 : "out-of-place",
      plan.check ? "checked" : "unchecked");
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

// The bench's clock: read once per timed iteration, at half the cost of steady_clock.
using Clock = FastClock;

// Microseconds from `from` to `to`. FastClock is not is_steady: clamped at zero.
double micros(Clock::time_point from, Clock::time_point to) {
  return std::max(0.0, std::chrono::duration<double, std::micro>(to - from).count());
}

// A job's first runs of an op are slower than its steady state: the first size of a run
// measured 190-260 us where the same size right after took 135-150 (8 B gloo allreduce,
// 2 ranks; shm at 4 ranks on 2 CPUs: 5.9 against 4.1 us), with the supervisor off too,
// and 200 warmup iterations removed it. Before the first timed loop the op runs untimed
// until the slowest rank has spent `settleS` on it, in batches sized from the pace so
// far; every rank runs the same batches (the agreed maximum sets them).
void settle(const BenchPlan& plan, StoreRounds& rounds, const std::function<void()>& once, const std::string& what) {
  const double goalUs = plan.settleS * 1e6;
  double spentUs = 0;
  for (int batch = std::max(plan.warmup, 1);;) {
    const auto start = Clock::now();
    for (int i = 0; i < batch; ++i) once();
    const double slowestUs = rounds.agreeMax(micros(start, Clock::now()), "settling " + what);
    spentUs += slowestUs;
    if (spentUs >= goalUs) return;
    batch = iterationsFor(1, false, (goalUs - spentUs) / 1e6, slowestUs / batch);
  }
}

// One column of a row: warmup, the timed rounds (every iteration clocked on its own, back
// to back), the check after the clock stopped, and the ranks' agreement on the figures.
Measurement measureColumn(const BenchPlan& plan, BenchOp& op, StoreRounds& rounds, const std::function<void()>& once,
                          const std::function<void()>& checkOnce, int64_t& wrong, const std::string& what) {
  std::vector<double> warm;
  for (int i = 0; i < plan.warmup; ++i) {
    const auto start = Clock::now();
    once();
    warm.push_back(micros(start, Clock::now()));
  }
  // The median, not the mean: a job's first ops wait for late peers and cold buffers, and
  // would make a 1 us op look like 200 us and get too few iterations. Also the barrier
  // before the timed loop; every rank gets the same count from it.
  const double slowestWarm = rounds.agreeMax(median(warm), "before the timed loop of " + what);
  int iters = iterationsFor(plan.iters, plan.fixedIters, plan.minTimeS, slowestWarm);
  std::vector<double> samples;
  std::vector<double> roundMeans;
  for (int r = 0; r < plan.repeat; ++r) {
    double sum = 0;
    int done = 0;
    for (int target = iters;;) {
      // Back to back: one clock read per iteration, and the samples add up to the loop's
      // time, as nccl-tests and the peers (which time the whole loop) count it.
      samples.reserve(samples.size() + static_cast<size_t>(target - done));
      for (auto start = Clock::now(); done < target; ++done) {
        once();
        const auto end = Clock::now();
        samples.push_back(micros(start, end));
        sum += samples.back();
        start = end;
      }
      // The first round checks the warmup's estimate: when the slowest rank's loop fell
      // short of --min-time (the warmup caught slow first ops), it runs on to the count
      // the loop's own pace asks for. Later rounds repeat the first round's count.
      if (r > 0 || plan.fixedIters || plan.minTimeS <= 0) break;
      const double slowestUs = rounds.agreeMax(sum, "the iteration count of " + what);
      if (slowestUs >= plan.minTimeS * 1e6) break;
      target = iterationsFor(plan.iters, false, plan.minTimeS, slowestUs / done);
      if (target <= done) break;
    }
    if (r == 0) iters = done;
    // The slowest rank's mean for the round; also the barrier before the next round.
    if (plan.repeat > 1)
      roundMeans.push_back(rounds.agreeMax(sum / done, "round " + std::to_string(r + 1) + " of " + what));
  }
  if (plan.check) checkOnce();  // after the clock stopped: one more run on fresh data
  const auto agreed = rounds.agree(summarize(samples), wrong, "timing and #wrong of " + what);
  Measurement m;
  m.stats = agreed.slowest;
  m.iters = iters;
  m.roundMeansUs = roundMeans;
  m.timeUs = roundMeans.empty() ? m.stats.meanUs : median(roundMeans);
  m.algbw = m.timeUs > 0 ? static_cast<double>(op.size()) / (m.timeUs * 1e-6) / 1e9 : 0;
  m.busbw = m.algbw * op.busFactor();
  m.wrong = plan.check ? agreed.sumWrong : -1;
  m.unstable = instability(m.stats, roundMeans);
  return m;
}

// What every measured cell of one bench run shares.
struct MeasureContext {
  const BenchPlan& plan;
  ProcessGroup& pg;
  BenchMemory& memory;
  Injector& inject;
  Swapper* swapper;
  StoreRounds rounds;
  bool settled;  // the job settled (--settle) before its first cell
};

// One column of one result line: `op` at `bytes`, `what` naming it in errors.
Measurement measureCell(MeasureContext& c, BenchOp& op, int64_t bytes, const std::string& what) {
  const auto run = [&] {
    c.pg.syncPoint();  // a config published by `commhost run --watch` switches here, alike on every rank
    if (c.swapper) c.swapper->beforeRun(c.pg);
    if (auto injected = c.inject.before(c.pg)) return injected;
    return op.run();
  };
  // An iteration ends when the op did: wait(), then, on a GPU, the caller's stream
  // synchronized (a stream-ordered backend such as nccl returns from wait() once
  // the stream is ordered after the op, before it ran). The host clock around both
  // times what an application sees from issue to result, as on cpu; CUDA events
  // would time only the device part, and not comparably across backends.
  const auto complete = [&](const WorkPtr& work) {
    work->wait();
    c.memory.synchronize();
  };
  // While swapping, --check checks every run: a result lost, applied twice or wrong
  // around a swap shows in #wrong (the times then include the fill and check).
  int64_t wrong = 0;
  const bool checkEach = c.swapper && c.plan.check;
  const auto once = [&] {
    if (checkEach) op.fill();
    complete(run());
    if (checkEach) wrong += op.check();
  };
  const auto checkOnce = [&] {
    op.fill();
    complete(run());
    wrong += op.check();
  };
  op.prepare(bytes);
  op.fill();
  if (!c.settled) settle(c.plan, c.rounds, once, what);
  c.settled = true;
  return measureColumn(c.plan, op, c.rounds, once, checkOnce, wrong, what);
}

int measure(const BenchPlan& plan, ProcessGroup& pg, BenchMemory& memory, Injector& inject, Report& report,
            Swapper* swapper) {
  const bool leader = pg.rank() == 0;
  // Progress only to a terminal: under `commhost run` stderr is the rank's log.
  const bool progress = leader && plan.sizes.size() > 8 && ::isatty(STDERR_FILENO);
  MeasureContext context{plan, pg, memory, inject, swapper, StoreRounds(pg), plan.settleS <= 0};
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
  resolveRoutes(a, launch.configPath, plan);
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
