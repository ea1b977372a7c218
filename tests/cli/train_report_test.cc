// SPDX-License-Identifier: Apache-2.0
// commhost train's communication figures from ReducerStats (tools/cli/train/report.h):
// communication time is the time some bucket was in flight, and the hidden share is
// what finalize() did not have to wait for.
#include "report.h"

#include <gtest/gtest.h>

namespace commhost::cli::train {
namespace {

using std::chrono::milliseconds;

ReducerStats statsOf(std::vector<std::pair<int, int>> launchAndComm, int waitMs) {
  ReducerStats s;
  for (const auto& [launch, comm] : launchAndComm) {
    s.launch.push_back(milliseconds(launch));
    s.comm.push_back(milliseconds(comm));
    s.buckets.push_back({s.buckets.size()});
  }
  s.finalizeWait = milliseconds(waitMs);
  s.backward = milliseconds(4);
  s.bytes = 1000;
  return s;
}

TEST(TrainReport, CommunicationIsTheTimeSomeBucketWasInFlight) {
  // [0, 2] and [1, 3] overlap (3 ms, not 4), then [5, 6]: 4 ms, of which 1 ms waited.
  const StepRecord r = stepRecord(statsOf({{5, 1}, {0, 2}, {1, 2}}, 1));
  EXPECT_DOUBLE_EQ(r.commMs, 4.0);
  EXPECT_DOUBLE_EQ(r.waitMs, 1.0);
  EXPECT_DOUBLE_EQ(r.hidden, 0.75);
  EXPECT_DOUBLE_EQ(r.backwardMs, 4.0);
  EXPECT_EQ(r.bytes, 1000);
  EXPECT_EQ(r.buckets, 3u);
}

TEST(TrainReport, BackwardBetweenTwoLaunchesIsNotCommunication) {
  // Buckets done at once (a noop hook), launched 3 ms apart: no communication at all.
  const StepRecord r = stepRecord(statsOf({{0, 0}, {3, 0}}, 0));
  EXPECT_DOUBLE_EQ(r.commMs, 0.0);
  EXPECT_DOUBLE_EQ(r.hidden, 0.0);
  // A bucket inside another's flight adds nothing.
  EXPECT_DOUBLE_EQ(stepRecord(statsOf({{0, 10}, {2, 3}}, 10)).commMs, 10.0);
  EXPECT_DOUBLE_EQ(stepRecord(statsOf({{0, 10}, {2, 3}}, 10)).hidden, 0.0);
}

TEST(TrainReport, TheHiddenShareStaysWithinZeroAndOne) {
  // finalize() can wait longer than a bucket was in flight (it also waits for the launch).
  EXPECT_DOUBLE_EQ(stepRecord(statsOf({{0, 2}}, 5)).hidden, 0.0);
  EXPECT_DOUBLE_EQ(stepRecord(statsOf({}, 0)).commMs, 0.0);
}

}  // namespace
}  // namespace commhost::cli::train
