// SPDX-License-Identifier: Apache-2.0
// The flight-recorder dump schema (commhost/flight_dump.h): what the writer encodes the
// reader gets back field for field, a dump of another version or a field of the wrong
// type is refused naming the file, and JSON that is not a dump is passed over.
#include <gtest/gtest.h>

#include "commhost/errors.h"
#include "commhost/flight_dump.h"
#include "supervisor/flight_recorder.h"

namespace commhost {
namespace {

FlightDump fullDump() {
  FlightDump d;
  d.reason = "incident: peer lost";
  d.rank = 3;
  d.pid = 4242;
  d.host = "node7";
  d.timeUs = 1700000000123456;
  d.entriesCapacity = 2000;
  d.groups.push_back({"main", 3, 4, {0, 1, 2, 3}, 41, 40, {{1, "heartbeat stopped"}, {-1, "store gone"}}, {2}});
  DumpOp op;
  op.id = 9;
  op.group = "main";
  op.op = "allreduce";
  op.backend = "shm";
  op.dtype = "f32";
  op.state = "failed";
  op.error = "peer 1 lost";
  op.rank = 3;
  op.worldSize = 4;
  op.seq = 41;
  op.generation = 2;
  op.bytes = 4096;
  op.numel = 1024;
  op.scheduledUs = 10;
  op.startedUs = 11;
  op.endedUs = 15;
  op.deviceMs = 1.25;
  d.entries.push_back(op);
  op.id = 10;
  op.state = "started";
  op.error.clear();
  op.deviceMs = -1;
  op.endedUs = 0;
  d.entries.push_back(op);
  d.swaps.push_back({"main", 3, 1, 2, "committed", 5, 1, 2, 3, 4, 10, {"gloo"}, {"shm"}, {"old"}, ""});
  d.memberships.push_back({"main", 3, 2, 4, 3, 2, 3, {1}, "shrunk", "", 20, 1, 2, 3, 4, 10});
  d.shadows.push_back({"main", 3, 40, "allreduce", 64, "shm", "gloo", "disagree", 2.5, 7.5, "element 3 differs"});
  return d;
}

TEST(FlightDump, WhatIsWrittenIsReadBackFieldForField) {
  const FlightDump d = fullDump();
  const auto back = decodeFlightDump(encodeFlightDump(d), "rank3.json");
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->version, kFlightDumpVersion);
  EXPECT_EQ(back->reason, d.reason);
  EXPECT_EQ(back->rank, 3);
  EXPECT_EQ(back->pid, 4242);
  EXPECT_EQ(back->host, "node7");
  EXPECT_EQ(back->timeUs, d.timeUs);
  EXPECT_EQ(back->entriesCapacity, 2000u);
  ASSERT_NE(back->group("main"), nullptr);
  EXPECT_EQ(back->group("sub"), nullptr);
  const DumpGroup& g = *back->group("main");
  EXPECT_EQ(g.globalRanks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(g.lastIssued, 41u);
  EXPECT_EQ(g.lastCompleted, 40u);
  EXPECT_EQ(g.lostPeers, (std::map<int, std::string>{{-1, "store gone"}, {1, "heartbeat stopped"}}));
  EXPECT_EQ(g.leftPeers, std::vector<int>{2});
  ASSERT_EQ(back->entries.size(), 2u);
  const DumpOp& e = back->entries[0];
  EXPECT_EQ(e.id, 9u);
  EXPECT_EQ(e.op, "allreduce");
  EXPECT_EQ(e.backend, "shm");
  EXPECT_EQ(e.dtype, "f32");
  EXPECT_EQ(e.state, "failed");
  EXPECT_EQ(e.error, "peer 1 lost");
  EXPECT_EQ(e.seq, 41u);
  EXPECT_EQ(e.generation, 2u);
  EXPECT_EQ(e.bytes, 4096);
  EXPECT_EQ(e.numel, 1024);
  EXPECT_EQ(e.endedUs, 15);
  EXPECT_EQ(e.deviceMs, 1.25);
  EXPECT_EQ(back->entries[1].deviceMs, -1);
  EXPECT_TRUE(back->entries[1].error.empty());
  ASSERT_EQ(back->swaps.size(), 1u);
  EXPECT_EQ(back->swaps[0].built, std::vector<std::string>{"shm"});
  EXPECT_EQ(back->swaps[0].totalUs, 10);
  ASSERT_EQ(back->memberships.size(), 1u);
  EXPECT_EQ(back->memberships[0].removed, std::vector<int>{1});
  EXPECT_EQ(back->memberships[0].rankAfter, 2);
  ASSERT_EQ(back->shadows.size(), 1u);
  EXPECT_EQ(back->shadows[0].detail, "element 3 differs");
  EXPECT_EQ(back->shadows[0].shadowUs, 7.5);
}

TEST(FlightDump, AbsentOptionalFieldsAreNotWritten) {
  const std::string text = encodeFlightDump(fullDump());
  // Once each: the failed op's error and device time; the running op has neither.
  EXPECT_EQ(text.find("\"device_ms\""), text.rfind("\"device_ms\"")) << text;
  EXPECT_EQ(text.find("\"error\": \"peer 1 lost\""), text.rfind("\"error\"")) << text;
}

TEST(FlightDump, AnotherVersionIsRefusedWithBothVersions) {
  try {
    decodeFlightDump(R"({"version": 2, "rank": 0, "entries": []})", "dumps/rank0.json");
    FAIL() << "a version 2 dump was read";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("dumps/rank0.json is a flight recorder dump of version 2 but this commhost "
                                         "reads version 1"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(decodeFlightDump(R"({"rank": 0, "entries": []})", "x.json"), InvalidArgument);  // no version
}

TEST(FlightDump, AFieldOfTheWrongTypeIsRefusedNamingTheFile) {
  for (const char* bad :
       {R"({"version": 1, "rank": 0, "entries": [1]})", R"({"version": 1, "rank": "zero", "entries": []})",
        R"({"version": 1, "rank": 0, "entries": [], "groups": [{"lost_peers": {"x": "y"}}]})"}) {
    try {
      decodeFlightDump(bad, "rank0.json");
      ADD_FAILURE() << "read: " << bad;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("rank0.json is not a flight recorder dump"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(decodeFlightDump("{not json", "rank0.json"), InvalidArgument);
}

TEST(FlightDump, JsonThatIsNotADumpIsPassedOver) {
  EXPECT_FALSE(decodeFlightDump(R"({"traceEvents": []})", "trace.json").has_value());
  EXPECT_FALSE(decodeFlightDump("[1, 2]", "list.json").has_value());
}

TEST(FlightDump, TheRecorderRecordBecomesTheSchemaOp) {
  supervisor::OpRecord r;
  r.order = 5;  // the dump's id: the order of recording
  supervisor::copyName(r.group, sizeof r.group, "main");
  supervisor::copyName(r.backend, sizeof r.backend, "gloo");
  r.op = OpType::Broadcast;
  r.dtype = DType::BFloat16;
  r.seq = 7;
  r.state = supervisor::OpState::Completed;
  const DumpOp o = supervisor::toDumpOp(r);
  EXPECT_EQ(o.id, 5u);
  EXPECT_EQ(o.group, "main");
  EXPECT_EQ(o.op, "broadcast");
  EXPECT_EQ(o.dtype, "bf16");
  EXPECT_EQ(o.state, "completed");
  EXPECT_EQ(o.deviceMs, -1);
  EXPECT_TRUE(o.error.empty());
}

}  // namespace
}  // namespace commhost
