// SPDX-License-Identifier: Apache-2.0
// Launch reports (commhost/sdk/launch_report.h): a record reads back as written, stays under
// the size the launcher reads however long its texts, and one of another version or shape
// is refused with the reason.
#include <gtest/gtest.h>

#include "commhost/errors.h"
#include "commhost/sdk/launch_report.h"

namespace commhost {
namespace {

TEST(LaunchReport, ReadsBackAsWritten) {
  for (LaunchEvent event : {LaunchEvent::StoreWaiting, LaunchEvent::StoreReached, LaunchEvent::StoreGaveUp,
                            LaunchEvent::Joined, LaunchEvent::Failed}) {
    const LaunchReport r{event, 3, "127.0.0.1:29500", 1.5, "store", "cannot connect", "check rank 0"};
    std::string problem;
    const auto back = decodeLaunchReport(encodeLaunchReport(r), &problem);
    ASSERT_TRUE(back.has_value()) << launchEventName(event) << ": " << problem;
    EXPECT_EQ(back->event, event);
    EXPECT_EQ(back->rank, 3);
    EXPECT_EQ(back->where, "127.0.0.1:29500");
    EXPECT_EQ(back->seconds, 1.5);
    EXPECT_EQ(back->code, "store");
    EXPECT_EQ(back->text, "cannot connect");
    EXPECT_EQ(back->hint, "check rank 0");
  }
  EXPECT_STREQ(launchEventName(LaunchEvent::StoreGaveUp), "store_gave_up");
}

TEST(LaunchReport, LongTextsAreCutUnderTheRecordLimit) {
  // Control characters take six bytes each in JSON: the worst case for the record's size.
  const std::string huge(100000, '\x01');
  const std::string record = encodeLaunchReport({LaunchEvent::Failed, 0, huge, 0, huge, huge, huge});
  EXPECT_LE(record.size(), kMaxLaunchReportBytes);
  std::string problem;
  const auto back = decodeLaunchReport(record, &problem);
  ASSERT_TRUE(back.has_value()) << problem;
  EXPECT_LT(back->text.size(), huge.size());
  EXPECT_EQ(back->text.substr(back->text.size() - 3), "...");
}

TEST(LaunchReport, AnotherVersionOrShapeIsRefusedWithTheReason) {
  std::string problem;
  EXPECT_FALSE(decodeLaunchReport(R"({"version": 2, "event": "joined"})", &problem));
  EXPECT_NE(problem.find("version 2, but this commhost reads version 1"), std::string::npos) << problem;
  EXPECT_FALSE(decodeLaunchReport("still waiting for the store at", &problem));
  EXPECT_NE(problem.find("not a launch report"), std::string::npos) << problem;
  EXPECT_FALSE(decodeLaunchReport(R"({"version": 1, "event": "exploded", "rank": 0, "where": "", "seconds": 0,
                                      "code": "", "text": "", "hint": ""})",
                                  &problem));
  EXPECT_NE(problem.find("unknown event 'exploded'"), std::string::npos) << problem;
  EXPECT_FALSE(decodeLaunchReport(R"({"version": 1, "event": "joined", "rank": "zero"})", &problem));
  EXPECT_NE(problem.find("malformed"), std::string::npos) << problem;
}

}  // namespace
}  // namespace commhost
