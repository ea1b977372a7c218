// SPDX-License-Identifier: Apache-2.0
#include "timing.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <sstream>

namespace commhost::cli {
namespace {

double medianOfSorted(const std::vector<double>& sorted) {
  const size_t n = sorted.size();
  return n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

}  // namespace

double percentile(const std::vector<double>& sorted, double p) {
  const auto rank = static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)];
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return medianOfSorted(values);
}

LoopStats summarize(std::vector<double>& samples) {
  LoopStats s;
  if (samples.empty()) return s;
  s.meanUs = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(samples.size());
  std::sort(samples.begin(), samples.end());
  s.minUs = samples.front();
  s.maxUs = samples.back();
  s.p50Us = medianOfSorted(samples);  // already sorted: median() would copy and sort again
  s.p99Us = percentile(samples, 0.99);
  return s;
}

LoopStats slowest(const std::vector<LoopStats>& perRank) {
  LoopStats s;
  for (const auto& r : perRank) {
    s.meanUs = std::max(s.meanUs, r.meanUs);
    s.minUs = std::max(s.minUs, r.minUs);
    s.p50Us = std::max(s.p50Us, r.p50Us);
    s.p99Us = std::max(s.p99Us, r.p99Us);
    s.maxUs = std::max(s.maxUs, r.maxUs);
  }
  return s;
}

std::string encode(const LoopStats& s) {
  char text[160];
  std::snprintf(text, sizeof text, "%.17g %.17g %.17g %.17g %.17g", s.meanUs, s.minUs, s.p50Us, s.p99Us, s.maxUs);
  return text;
}

LoopStats decode(const std::string& text) {
  LoopStats s;
  std::istringstream in(text);
  in >> s.meanUs >> s.minUs >> s.p50Us >> s.p99Us >> s.maxUs;
  return s;
}

std::string instability(const LoopStats& s, const std::vector<double>& roundMeansUs) {
  char why[160];
  if (s.p50Us > 0 && s.meanUs > 1.25 * s.p50Us) {
    std::snprintf(why, sizeof why, "the mean %.1f us is %.2fx the median %.1f us (slow outliers, max %.1f us)",
                  s.meanUs, s.meanUs / s.p50Us, s.p50Us, s.maxUs);
    return why;
  }
  if (roundMeansUs.size() > 1) {
    const auto [lo, hi] = std::minmax_element(roundMeansUs.begin(), roundMeansUs.end());
    if (*lo > 0 && *hi > 1.25 * *lo) {
      std::snprintf(why, sizeof why, "round means range from %.1f to %.1f us (%.2fx)", *lo, *hi, *hi / *lo);
      return why;
    }
  }
  return "";
}

int iterationsFor(int iters, bool fixed, double minTimeS, double perIterUs) {
  if (fixed || minTimeS <= 0 || perIterUs <= 0) return iters;
  const double byTime = std::ceil(minTimeS * 1e6 / perIterUs);
  return static_cast<int>(std::max(static_cast<double>(iters), std::min(byTime, 100000.0)));
}

}  // namespace commhost::cli
