// SPDX-License-Identifier: Apache-2.0
// FastClock against steady_clock, and its conversion (CycleAnchor) driven with made-up
// counter/clock pairs: no rate before two pairs a refresh apart, exact conversion on a
// steady counter, no step at an update, a drifting clock followed, loose pairs ignored.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "commhost/fast_clock.h"
#include "core/cycle_anchor.h"

namespace commhost {
namespace {

using detail::CycleAnchor;
constexpr int64_t kRefresh = 10'000'000;  // ns
constexpr uint64_t kTicksPerNs = 3;       // a 3 GHz counter

TEST(CycleAnchor, ConvertsOnlyOnceTwoPairsARefreshApartGaveARate) {
  CycleAnchor a(kRefresh);
  int64_t ns = 0;
  const uint64_t t0 = 1'000'000;
  const int64_t n0 = 5'000'000'000;
  EXPECT_FALSE(a.toNs(t0, ns));
  ASSERT_TRUE(a.update(t0, n0, 40));
  EXPECT_FALSE(a.toNs(t0 + 30, ns));  // one pair: no rate yet
  ASSERT_TRUE(a.update(t0 + kTicksPerNs * kRefresh / 2, n0 + kRefresh / 2, 40));
  EXPECT_FALSE(a.toNs(t0 + 30, ns));  // half a refresh is too short a baseline
  const uint64_t t1 = t0 + kTicksPerNs * kRefresh;
  ASSERT_TRUE(a.update(t1, n0 + kRefresh, 40));
  for (uint64_t d : {uint64_t{0}, uint64_t{3}, uint64_t{3'000}, uint64_t{3'000'000}, kTicksPerNs * kRefresh}) {
    ASSERT_TRUE(a.toNs(t1 + d, ns)) << d;
    EXPECT_NEAR(ns, n0 + kRefresh + static_cast<int64_t>(d / kTicksPerNs), 1) << d;
  }
  ASSERT_TRUE(a.toNs(t1 - 3'000, ns));  // just before the anchor: converted backwards
  EXPECT_NEAR(ns, n0 + kRefresh - 1'000, 1);
  EXPECT_FALSE(a.toNs(t1 + kTicksPerNs * kRefresh + 3'000, ns));  // a refresh on: update first
  EXPECT_FALSE(a.toNs(t1 - kTicksPerNs * kRefresh - 3'000, ns));
}

// A clock that drifts from the counter's first rate by `driftPer10k` parts in 10,000 of
// each step: at each update the line goes on without a step, and within two refreshes it
// is back on the clock (at most 200 ns off, where 20 refreshes unsteered would be 20 us).
void followsDriftingClock(int64_t driftPer10k) {
  CycleAnchor a(kRefresh);
  uint64_t t = 1'000'000;
  int64_t clock = 0;
  a.update(t, clock, 40);
  t += kTicksPerNs * kRefresh;
  clock += kRefresh;
  a.update(t, clock, 40);
  int64_t worst = 0;
  for (int i = 0; i < 20; ++i) {
    const uint64_t step = kTicksPerNs * (kRefresh - kRefresh / 200);  // the line about to expire
    const int64_t stepNs = (kRefresh - kRefresh / 200) + driftPer10k * kRefresh / 10'000;
    int64_t before = 0, after = 0;
    ASSERT_TRUE(a.toNs(t + step, before));
    t += step;
    clock += stepNs;
    ASSERT_TRUE(a.update(t, clock, 40));
    ASSERT_TRUE(a.toNs(t, after));
    EXPECT_LE(std::abs(after - before), 1) << "update " << i << " stepped the line";
    if (i >= 2) worst = std::max(worst, std::abs(after - clock));
  }
  EXPECT_LE(worst, 200);
}

// The clock runs 100 ppm faster than the counter's first rate says (NTP slewing).
TEST(CycleAnchor, FollowsADriftingClockWithoutSteps) { followsDriftingClock(1); }

// The clock runs 100 ppm slower: the line is ahead of it at each update, so the steer is
// negative (it was shifted left, undefined behaviour that UBSan reported under train).
TEST(CycleAnchor, FollowsAClockSlowerThanTheLine) { followsDriftingClock(-1); }

TEST(CycleAnchor, ALoosePairSetsNoRateAndAFarLineStartsAgain) {
  CycleAnchor a(kRefresh, 500);
  int64_t ns = 0;
  a.update(3'000, 1'000, 40);
  a.update(3'000 + kTicksPerNs * kRefresh, 1'000 + kRefresh, 9'000);  // preempted between its reads
  EXPECT_FALSE(a.toNs(3'000 + kTicksPerNs * kRefresh, ns));
  const uint64_t t1 = 3'000 + 2 * kTicksPerNs * kRefresh;
  a.update(t1, 1'000 + 2 * kRefresh, 40);
  ASSERT_TRUE(a.toNs(t1 + 300, ns));
  EXPECT_NEAR(ns, 1'000 + 2 * kRefresh + 100, 1);
  // The process was stopped for a second: the counter's line is far from the pair, which
  // it takes as it is.
  const uint64_t t2 = t1 + kTicksPerNs * 1'000'000'000;
  a.update(t2, 1'000 + 2 * kRefresh + 1'000'000'000 + 7'000'000, 40);
  ASSERT_TRUE(a.toNs(t2, ns));
  EXPECT_EQ(ns, 1'000 + 2 * kRefresh + 1'000'000'000 + 7'000'000);
}

// The real clock, from several threads at once (re-anchoring as they go): close to
// steady_clock, and no thread sees it step back by more than a microsecond.
TEST(FastClock, AgreesWithSteadyClockFromEveryThread) {
  using std::chrono::duration_cast;
  using std::chrono::microseconds;
  std::vector<int64_t> worstOff(4), worstBack(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < worstOff.size(); ++i)
    threads.emplace_back([&, i] {
      auto last = FastClock::now();
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(60);
      for (int n = 0; std::chrono::steady_clock::now() < until; ++n) {
        const auto before = std::chrono::steady_clock::now();
        const auto fast = FastClock::now();
        const auto after = std::chrono::steady_clock::now();
        // Off by how much outside [before, after], in us.
        const auto off = fast < before ? before - fast : fast > after ? fast - after : std::chrono::nanoseconds(0);
        worstOff[i] = std::max<int64_t>(worstOff[i], duration_cast<microseconds>(off).count());
        if (fast < last)
          worstBack[i] = std::max<int64_t>(worstBack[i], duration_cast<microseconds>(last - fast).count());
        last = fast;
        if (n % 64 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    });
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < worstOff.size(); ++i) {
    // A loose bound: a thread preempted between its reads widens [before, after] anyway.
    EXPECT_LE(worstOff[i], 50) << "thread " << i << (FastClock::countsCycles() ? " (counter)" : " (steady_clock)");
    EXPECT_LE(worstBack[i], 1) << "thread " << i;
  }
}

}  // namespace
}  // namespace commhost
