// SPDX-License-Identifier: Apache-2.0
// commhost bench's statistics: percentiles, the slowest rank's figures, the instability
// verdict and how many iterations a size gets.
#include <gtest/gtest.h>

#include "timing.h"

namespace commhost::cli {
namespace {

TEST(BenchTiming, SummarizeGivesMeanAndNearestRankPercentiles) {
  std::vector<double> samples;
  for (int i = 100; i >= 1; --i) samples.push_back(i);  // 1..100, given in reverse
  const LoopStats s = summarize(samples);
  EXPECT_DOUBLE_EQ(s.meanUs, 50.5);
  EXPECT_DOUBLE_EQ(s.minUs, 1);
  EXPECT_DOUBLE_EQ(s.p50Us, 50.5);
  EXPECT_DOUBLE_EQ(s.p99Us, 99);
  EXPECT_DOUBLE_EQ(s.maxUs, 100);
  std::vector<double> one{7};
  const LoopStats single = summarize(one);
  EXPECT_DOUBLE_EQ(single.p99Us, 7);
  EXPECT_DOUBLE_EQ(single.p50Us, 7);
  std::vector<double> none;
  EXPECT_DOUBLE_EQ(summarize(none).maxUs, 0);
}

TEST(BenchTiming, SlowestTakesEachFigureFromTheRankWhereItIsLargest) {
  LoopStats a{10, 1, 5, 20, 30}, b{8, 2, 6, 15, 40};
  const LoopStats s = slowest({a, b});
  EXPECT_DOUBLE_EQ(s.meanUs, 10);
  EXPECT_DOUBLE_EQ(s.minUs, 2);
  EXPECT_DOUBLE_EQ(s.p50Us, 6);
  EXPECT_DOUBLE_EQ(s.p99Us, 20);
  EXPECT_DOUBLE_EQ(s.maxUs, 40);
}

TEST(BenchTiming, StatsSurviveTheStoreRoundTrip) {
  const LoopStats s{123.456789012345, 0.5, 100.25, 7000.125, 9e9};
  const LoopStats back = decode(encode(s));
  EXPECT_DOUBLE_EQ(back.meanUs, s.meanUs);
  EXPECT_DOUBLE_EQ(back.minUs, s.minUs);
  EXPECT_DOUBLE_EQ(back.p50Us, s.p50Us);
  EXPECT_DOUBLE_EQ(back.p99Us, s.p99Us);
  EXPECT_DOUBLE_EQ(back.maxUs, s.maxUs);
}

TEST(BenchTiming, OutliersThatCarryTheMeanMakeARowUnstable) {
  // 95 iterations at 100 us and 5 stalls of 4 ms (a descheduled thread): the mean is
  // 295 us, nearly 3x the median, and is not a figure to trust.
  std::vector<double> stalls(95, 100.0);
  for (int i = 0; i < 5; ++i) stalls.push_back(4000);
  const std::string why = instability(summarize(stalls), {});
  EXPECT_NE(why.find("2.95x the median 100.0 us"), std::string::npos) << why;
  // A long tail alone (p99 at 3x) with the mean near the median is ordinary.
  std::vector<double> tail(99, 100.0);
  tail.push_back(300);
  EXPECT_EQ(instability(summarize(tail), {}), "");
  // Rounds that disagree by more than 25%.
  std::vector<double> steady(10, 100.0);
  EXPECT_EQ(instability(summarize(steady), {100, 110, 120}), "");
  EXPECT_NE(instability(summarize(steady), {100, 130}).find("from 100.0 to 130.0 us (1.30x)"), std::string::npos);
}

TEST(BenchTiming, IterationsFillTheMinimumTimeUnlessFixed) {
  EXPECT_EQ(iterationsFor(20, true, 0.1, 10), 20);      // -n given: exactly n
  EXPECT_EQ(iterationsFor(20, false, 0.1, 10), 10000);  // 0.1 s at 10 us
  EXPECT_EQ(iterationsFor(20, false, 0.1, 50000), 20);  // slow sizes keep the floor
  EXPECT_EQ(iterationsFor(20, false, 10, 1), 100000);   // capped
  EXPECT_EQ(iterationsFor(20, false, 0.1, 0), 20);      // no warmup, no estimate
  EXPECT_EQ(iterationsFor(20, false, 0, 10), 20);       // --min-time 0
}

TEST(BenchTiming, MedianOfEvenAndOddCounts) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 2, 3}), 2.5);
  EXPECT_DOUBLE_EQ(median({}), 0);
}

}  // namespace
}  // namespace commhost::cli
