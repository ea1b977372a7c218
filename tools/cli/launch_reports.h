// SPDX-License-Identifier: Apache-2.0
// What `commhost run` learns from each rank's launch reports (commhost/sdk/launch_report.h):
// whether it reached the store, joined the job, and why it failed, read from a
// SOCK_SEQPACKET socket pair per rank instead of from the rank's output.
//
// Threading: the launcher's thread only.
#pragma once

#include <optional>
#include <string>

#include "commhost/sdk/launch_report.h"

namespace commhost::cli {

// One rank's end of the channel: the launcher reads `mine`; the rank's process inherits
// `theirs` (its number in COMMHOST_LAUNCH_REPORT_FD), which the launcher closes once the
// process has started.
struct ReportChannel {
  int mine = -1;
  int theirs = -1;
  // Throws std::runtime_error naming the call that failed.
  static ReportChannel open();
};

class RankReports {
 public:
  enum class StoreReach { Unknown, Waiting, Reached, GaveUp };

  // Reads every record waiting on `fd` (non-blocking) and takes it in; returns whether one
  // came. A record this launcher cannot read is noted once (problem()). At end of stream
  // (no process holds the rank's end any more) closes `fd` and sets it to -1.
  bool readFrom(int& fd);
  void take(const LaunchReport& report);

  StoreReach store() const { return store_; }
  bool joined() const { return joined_; }
  // The first Failed report, if any: the rank's own account of why it is failing.
  const std::optional<LaunchReport>& failure() const { return failure_; }
  const std::string& problem() const { return problem_; }
  // "[peer-lost] <the error's first sentence>", for the launcher's summary (the rank
  // printed the whole message); "" without a Failed report.
  std::string failureLine() const;

 private:
  StoreReach store_ = StoreReach::Unknown;
  bool joined_ = false;
  std::optional<LaunchReport> failure_;
  std::string problem_;
};

}  // namespace commhost::cli
