// SPDX-License-Identifier: Apache-2.0
#include "measure.h"

#include <algorithm>
#include <chrono>
#include <functional>

#include "commhost/fast_clock.h"
#include "timing.h"

namespace commhost::cli {
namespace {

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

// Runs `once` until `done` reaches `target` and returns the microseconds that took. With
// --timing each, every iteration is clocked on its own, back to back: one clock read per
// iteration, and the samples (appended to `samples`) add up to the loop's time, as
// nccl-tests and the peers (which time the whole loop) count it. With --timing loop, the
// loop is clocked once, so the figure carries no clock read of the bench's own.
double timedLoop(const BenchPlan& plan, const std::function<void()>& once, int& done, int target,
                 std::vector<double>& samples) {
  if (!plan.timeEach) {
    const auto start = Clock::now();
    for (; done < target; ++done) once();
    return micros(start, Clock::now());
  }
  double sum = 0;
  samples.reserve(samples.size() + static_cast<size_t>(target - done));
  for (auto start = Clock::now(); done < target; ++done) {
    once();
    const auto end = Clock::now();
    samples.push_back(micros(start, end));
    sum += samples.back();
    start = end;
  }
  return sum;
}

// One column of a row: warmup, the timed rounds (timedLoop), the check after the clock
// stopped, and the ranks' agreement on the figures.
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
  double totalUs = 0;
  int totalIters = 0;
  for (int r = 0; r < plan.repeat; ++r) {
    double sum = 0;
    int done = 0;
    for (int target = iters;;) {
      sum += timedLoop(plan, once, done, target, samples);
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
    totalUs += sum;
    totalIters += done;
    // The slowest rank's mean for the round; also the barrier before the next round.
    if (plan.repeat > 1)
      roundMeans.push_back(rounds.agreeMax(sum / done, "round " + std::to_string(r + 1) + " of " + what));
  }
  if (plan.check) checkOnce();  // after the clock stopped: one more run on fresh data
  LoopStats mine;               // --timing loop: the mean alone
  if (plan.timeEach) mine = summarize(samples);
  else mine.meanUs = totalUs / totalIters;
  const auto agreed = rounds.agree(mine, wrong, "timing and #wrong of " + what);
  Measurement m;
  m.stats = agreed.slowest;
  m.percentiles = plan.timeEach;
  m.iters = iters;
  m.roundMeansUs = roundMeans;
  m.timeUs = roundMeans.empty() ? m.stats.meanUs : median(roundMeans);
  m.algbw = m.timeUs > 0 ? static_cast<double>(op.size()) / (m.timeUs * 1e-6) / 1e9 : 0;
  m.busbw = m.algbw * op.busFactor();
  m.wrong = plan.check ? agreed.sumWrong : -1;
  m.unstable = instability(m.stats, roundMeans);
  return m;
}

}  // namespace

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

}  // namespace commhost::cli
