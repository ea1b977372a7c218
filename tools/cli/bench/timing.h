// SPDX-License-Identifier: Apache-2.0
// How the bench turns per-iteration times into the figures it prints: every timed
// iteration is clocked on its own, so a row carries the spread (min, median, p99, max)
// next to the mean nccl-tests prints, and a row whose iterations spread widely is
// flagged instead of being trusted. Also how many iterations a size gets when the
// user did not fix -n: enough to fill --min-time, so small sizes (tens of us) are not
// judged on 20 iterations that one scheduler hiccup can double.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace commhost::cli {

struct LoopStats {
  double meanUs = 0, minUs = 0, p50Us = 0, p99Us = 0, maxUs = 0;
};

// Over one rank's per-iteration times; `samples` is reordered. Empty -> all zero.
LoopStats summarize(std::vector<double>& samples);

// The slowest rank's figure for each statistic (ranks' clocks are not compared, only
// their durations): what every rank prints for a row.
LoopStats slowest(const std::vector<LoopStats>& perRank);

// "12.5 34.1 ..." and back, for the bench's store rounds.
std::string encode(const LoopStats& s);
LoopStats decode(const std::string& text);

// A row is unstable when its mean is over 1.25x its median (a few slow iterations carry
// the figure; a p99 well above the median alone is ordinary on a shared machine), or
// (with --repeat) its slowest round's mean is over 1.25x its fastest's. Returns why, or
// "" when it is stable.
std::string instability(const LoopStats& s, const std::vector<double>& roundMeansUs);

// Iterations for a timed loop: `iters` when fixed (-n given, no --min-time); otherwise
// at least `iters` and enough to last `minTimeS` at `perIterUs` (the slowest rank's
// warmup time per iteration), capped at 100000 (or `iters`, when that is more).
int iterationsFor(int iters, bool fixed, double minTimeS, double perIterUs);

double median(std::vector<double> values);
// Nearest rank: the smallest of `sorted` (ascending, not empty) that at least a fraction
// p (0..1] of the values do not exceed.
double percentile(const std::vector<double>& sorted, double p);

}  // namespace commhost::cli
