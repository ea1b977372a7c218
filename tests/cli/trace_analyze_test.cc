// SPDX-License-Identifier: Apache-2.0
// `commhost trace analyze` on dumps as the supervisor writes them: a running job's dumps
// (taken moments apart, ranks an op apart) are skew, not a divergence; a rank that stopped
// long before its dump is still named.
#include <gtest/gtest.h>

#include "dumps.h"

namespace commhost::cli::trace {
namespace {

constexpr int64_t kNow = 1'700'000'000'000'000;  // µs, a wall-clock time

// A rank's dump: allreduce seq 1..completed done, each 1 ms long and 1 ms apart, the last
// ending `idleUs` before its dump; then seq completed+1 started `startedAgoUs` before the
// dump when that is >= 0.
RankDump rankDump(int rank, uint64_t completed, int64_t idleUs, int64_t startedAgoUs = -1) {
  RankDump d;
  d.rank = rank;
  d.timeUs = kNow;
  d.reason = "commhost trace dump: asked from host pid 1";
  d.groups.push_back({"main", rank, 2, {0, 1}, completed, completed, {}, {}});
  const int64_t lastEnd = kNow - idleUs;
  for (uint64_t seq = 1; seq <= completed; ++seq) {
    DumpOp e;
    e.group = "main";
    e.op = "allreduce";
    e.backend = "shm";
    e.dtype = "f32";
    e.state = "completed";
    e.rank = rank;
    e.worldSize = 2;
    e.seq = seq;
    e.numel = 256;
    e.endedUs = lastEnd - static_cast<int64_t>(completed - seq) * 2000;
    e.startedUs = e.scheduledUs = e.endedUs - 1000;
    d.entries.push_back(e);
  }
  if (startedAgoUs >= 0) {
    DumpOp e = d.entries.back();
    e.seq = completed + 1;
    e.state = "started";
    e.startedUs = e.scheduledUs = kNow - startedAgoUs;
    e.endedUs = 0;
    d.entries.push_back(e);
  }
  return d;
}

TEST(TraceAnalyze, DumpsOfARunningJobAreSkewNotAHang) {
  // Rank 0 is in seq 11 (started 300 us ago); rank 1 finished seq 10 1 ms before its dump.
  const std::string report = analyze({rankDump(0, 10, 400, 300), rankDump(1, 10, 1000)});
  EXPECT_NE(report.find("Group main: no problem seen. The ranks' last collectives are seq 10 to 11"), std::string::npos)
      << report;
  EXPECT_EQ(report.find("first divergence"), std::string::npos) << report;
}

TEST(TraceAnalyze, ARankThatStoppedLongBeforeItsDumpIsStillNamed) {
  // Rank 1's last op ended 30 s before its dump while rank 0 waits in seq 11.
  const std::string report = analyze({rankDump(0, 10, 30'000'000, 29'000'000), rankDump(1, 10, 30'000'000)});
  EXPECT_NE(report.find("the first divergence is at allreduce seq 11"), std::string::npos) << report;
  EXPECT_NE(report.find("Rank 1 never issued it"), std::string::npos) << report;
  EXPECT_EQ(report.find("no problem seen"), std::string::npos) << report;

  // Recent progress does not excuse a failure or ranks that disagree on the call.
  RankDump failed = rankDump(0, 10, 400, 300);
  failed.entries.back().state = "failed";
  EXPECT_NE(analyze({failed, rankDump(1, 10, 1000, 200)}).find("first divergence"), std::string::npos);
  // Nor dumps the supervisor wrote for an incident (a 1 s group timeout is within 2 s).
  RankDump incident0 = rankDump(0, 10, 1'100'000, 1'050'000), incident1 = rankDump(1, 10, 1'100'000);
  incident0.reason = incident1.reason = "incident: allreduce seq 11";
  EXPECT_NE(analyze({incident0, incident1}).find("Rank 1 never issued it"), std::string::npos);
  // A rank that failed further on (on_error: report) while another is behind is no skew.
  RankDump ahead = rankDump(0, 12, 400);
  ahead.entries.back().state = "failed";
  EXPECT_NE(analyze({ahead, rankDump(1, 10, 1000, 200)}).find("first divergence"), std::string::npos);
  RankDump other = rankDump(1, 10, 1000, 200);
  other.entries.back().numel = 512;
  EXPECT_NE(analyze({rankDump(0, 10, 400, 300), other}).find("The ranks disagree on the call"), std::string::npos);
}

// Global rank 1 of 3 was lost after seq 10; the survivors (global 0 and 2) shrank to 2
// ranks at generation 1 and went on to seq 20 with global 2 as group rank 1. Each
// membership is compared on its own: group rank 1 of the first is the lost rank, not
// global rank 2 after the shrink.
RankDump survivorDump(int global, int rankAfter) {
  RankDump d = rankDump(global, 20, 1000);
  for (auto& e : d.entries) {
    const bool after = e.seq > 10;
    e.worldSize = after ? 2 : 3;
    e.rank = after ? rankAfter : global;
    e.generation = after ? 1 : 0;
  }
  MembershipRecord m;
  m.group = "main";
  m.outcome = "shrunk";
  m.rankBefore = global;
  m.rankAfter = rankAfter;
  m.worldBefore = 3;
  m.worldAfter = 2;
  m.fromGeneration = 0;
  m.toGeneration = 1;
  m.removed = {1};
  m.agreeUs = 120'000;
  d.memberships.push_back(m);
  return d;
}

TEST(TraceAnalyze, EachMembershipOfAShrunkGroupIsComparedOnItsOwn) {
  const std::string report = analyze({survivorDump(0, 0), survivorDump(2, 1)});
  EXPECT_NE(report.find("Group main: rank 2 (group rank 2 -> 1) shrunk 3 -> 2 ranks, generation 0 -> 1 (removed: 1; "
                        "agree 120.0 ms"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("Group main: no dump from rank 1"), std::string::npos) << report;
  EXPECT_NE(report.find("Group main (members since generation 1): all 2 ranks recorded seq 11 to 20"),
            std::string::npos)
      << report;
}

}  // namespace
}  // namespace commhost::cli::trace
