// SPDX-License-Identifier: Apache-2.0
// The supervisor's cross-rank codec (host/src/supervisor/messages.h) on its own: every
// message round-trips, and garbage decodes to an error, never to rank 0.
#include <gtest/gtest.h>

#include <algorithm>

#include "supervisor/messages.h"

namespace commhost::supervisor::wire {
namespace {

std::string noNewline(std::string s) {
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

TEST(SupervisorMessages, IncidentRoundTrips) {
  const std::string line = encode(Incident{3, 7, 1700000000123, "allreduce seq 12"});
  EXPECT_EQ(line, "s1|incident|3|7|1700000000123|allreduce seq 12\n");
  const auto d = decodeLogLine(noNewline(line));
  ASSERT_TRUE(d) << d.error;
  ASSERT_EQ(d.value.kind, LogLine::Kind::Incident);
  EXPECT_EQ(d.value.incident.rank, 3);
  EXPECT_EQ(d.value.incident.number, 7);
  EXPECT_EQ(d.value.incident.raisedAtMs, 1700000000123);
  EXPECT_EQ(d.value.incident.what, "allreduce seq 12");
}

TEST(SupervisorMessages, PeerLostRoundTripsWithSeparatorsBlanked) {
  const std::string line = encode(PeerLost{0, 2, "no heartbeat | for 3s\nsecond line"});
  EXPECT_EQ(std::count(line.begin(), line.end(), '\n'), 1);
  const auto d = decodeLogLine(noNewline(line));
  ASSERT_TRUE(d) << d.error;
  ASSERT_EQ(d.value.kind, LogLine::Kind::PeerLost);
  EXPECT_EQ(d.value.peerLost.rank, 0);
  EXPECT_EQ(d.value.peerLost.peer, 2);
  EXPECT_EQ(d.value.peerLost.why, "no heartbeat   for 3s second line");
}

TEST(SupervisorMessages, LongTextIsCutSoLinesStayBounded) {
  const std::string line = encode(PeerLost{1, 2, std::string(10000, 'x')});
  EXPECT_LT(line.size(), kMaxText + 64);
  EXPECT_TRUE(decodeLogLine(noNewline(line)));
}

TEST(SupervisorMessages, AckAndProgressRoundTrip) {
  const auto ack = decodeAck(noNewline(encodeAck(5)));
  ASSERT_TRUE(ack) << ack.error;
  EXPECT_EQ(ack.value, 5);
  const auto p = decodeProgress(encode(Progress{12, "allreduce", 11}));
  ASSERT_TRUE(p) << p.error;
  EXPECT_EQ(p.value.issued, 12u);
  EXPECT_EQ(p.value.issuedOp, "allreduce");
  EXPECT_EQ(p.value.completed, 11u);
  EXPECT_TRUE(decodeProgress(encode(Progress{0, "none", 0})));
}

// The old atoi parsing read each of these as rank 0 (or a number from its prefix).
TEST(SupervisorMessages, GarbageIsAnErrorNeverRankZero) {
  for (const char* bad : {"",
                          "garbage",
                          "incident|1|1|allreduce seq 1|5",  // the unversioned format
                          "s1|incident|x|1|5|w",
                          "s1|incident||1|5|w",
                          "s1|incident|-1|1|5|w",
                          "s1|incident| 1|1|5|w",
                          "s1|incident|+1|1|5|w",
                          "s1|incident|1x|1|5|w",
                          "s1|incident|01|1|5|w",
                          "s1|incident|1|1|5|w\r",
                          "s1|incident|1|0|5|w",
                          "s1|incident|1|1|5",
                          "s1|incident|1|1|5|w|extra",
                          "s1|incident|99999999999999999999999|1|5|w",
                          "s1|incident|16777216|1|5|w",
                          "s1|peer|1|two|why",
                          "s1|peer|1|2",
                          "s1|peer|1|2|a|b",
                          "s2|peer|1|2|why",
                          "s1|nonsense|1|2|why",
                          "S1|peer|1|2|why",
                          "s1|ack|1"}) {
    const auto d = decodeLogLine(bad);
    EXPECT_FALSE(d) << "'" << bad << "' decoded";
    EXPECT_FALSE(d.error.empty());
  }
  for (const char* bad : {"", "3,", "s1|ack|", "s1|ack|-3", "s1|ack|3|4", "s1|ack|3 ", "s1|incident|3"})
    EXPECT_FALSE(decodeAck(bad)) << "'" << bad << "' decoded";
  for (const char* bad :
       {"12 allreduce 11", "s1|progress|12|allreduce", "s1|progress|12|all reduce|11", "s1|progress|0|allreduce|0",
        "s1|progress|3|none|0", "s1|progress|-1|allreduce|0", "s1|progress|1|allreduce|1|2"})
    EXPECT_FALSE(decodeProgress(bad)) << "'" << bad << "' decoded";
}

TEST(SupervisorMessages, ErrorsNameTheProblemAndShowTheInput) {
  const auto d = decodeLogLine("s1|incident|x|1|5|w");
  EXPECT_NE(d.error.find("bad rank"), std::string::npos) << d.error;
  EXPECT_NE(d.error.find("s1|incident|x"), std::string::npos) << d.error;
  EXPECT_NE(decodeLogLine("v9|peer|1|2|x").error.find("not version s1"), std::string::npos);
}

TEST(SupervisorMessages, SplitLinesKeepsAnUnterminatedLast) {
  EXPECT_EQ(splitLines("a\nb\n"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(splitLines("a\n\nb"), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_TRUE(splitLines("").empty());
}

}  // namespace
}  // namespace commhost::supervisor::wire
