// SPDX-License-Identifier: Apache-2.0
// Launch reports: what a rank tells the launcher that started it (`commhost run`) while it
// starts and when it fails, as typed records rather than log lines to be matched.
//
// The channel: `commhost run` gives each rank one end of a SOCK_SEQPACKET socket pair and
// its descriptor number in COMMHOST_LAUNCH_REPORT_FD (a launch variable, as RANK is). The
// host sends one record per report (encodeLaunchReport), never blocking and never
// raising SIGPIPE: a report the launcher cannot take is dropped, since a rank must not
// wait on its launcher. Under any other launcher the channel is absent and reports go
// nowhere.
//
// Who reports: the host (Joined once the world group exists; Failed with the error that
// ends init, or the verdict that aborts the world group), and any store or backend plugin,
// through StoreContext::reportLaunch and BackendContext::reportLaunch (null when no
// launcher listens). The tcp
// store reports StoreWaiting / StoreReached / StoreGaveUp while it connects.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "commhost/export.h"

namespace commhost {

// Bumped when a field changes meaning or goes; a new optional field keeps the version.
constexpr int kLaunchReportVersion = 1;

enum class LaunchEvent : uint8_t {
  StoreWaiting,  // still trying to reach the store at `where` after `seconds`
  StoreReached,  // reached it after progress reports
  StoreGaveUp,   // gave up on it; `text` is the error
  Joined,        // the world group exists: this rank is in the job
  Failed,        // this rank's part of the job failed; `text` says why, `hint` what to do
};
COMMHOST_API const char* launchEventName(LaunchEvent event);  // "store_waiting", ...

struct LaunchReport {
  LaunchEvent event = LaunchEvent::Joined;
  int rank = -1;       // the job's (global) rank; the host fills it when -1
  std::string where;   // the store's or peer's address, the group: what it is about
  double seconds = 0;  // how long the rank has waited, where that applies
  std::string code;    // Failed: the ErrorCode's name ("PeerLost", "Store", ...), if any
  std::string text;    // for people: the error, or what the rank is waiting on
  std::string hint;    // Failed: what to do next
};

// Hands a report to the launcher's channel. Never blocks, never throws.
using LaunchReportFn = std::function<void(const LaunchReport&)>;

// One record: a JSON object with "version"; its texts are cut so that it stays under
// kMaxLaunchReportBytes, the most the launcher reads of one.
constexpr size_t kMaxLaunchReportBytes = 32768;
COMMHOST_API std::string encodeLaunchReport(const LaunchReport& report);
// The record back; nullopt, with `*problem` saying why, for a record of another version or
// one that is not a launch report.
COMMHOST_API std::optional<LaunchReport> decodeLaunchReport(const std::string& record, std::string* problem);

// This process's channel to its launcher (COMMHOST_LAUNCH_REPORT_FD), opened on first use;
// null when the process has none (another launcher, or none). Thread-safe.
COMMHOST_API const LaunchReportFn& launchReporter();

// Sends a Failed report for `e` to this process's launcher, if one listens: the code of a
// commhost::Error (its message already says what to do), `where` naming the group or part.
COMMHOST_API void reportLaunchFailure(const std::exception& e, const std::string& where);

}  // namespace commhost
