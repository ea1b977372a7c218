// SPDX-License-Identifier: Apache-2.0
// The dashboard of `commhost run --dashboard HOST:PORT`: one static page (installed as
// share/commhost/dashboard/index.html; a build tree serves the source's) that reads
// /dashboard.json once a second: the summary and its problems, computed here by the same
// code as `commhost status`, and the ranks' records.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "commhost/job_status.h"

namespace commhost::cli {

// The page's text; throws InvalidArgument naming where it looked when it is missing.
std::string dashboardPage();
// {"summary", "problems": [{rank, kind, text}], "now_unix_ms", "job": jobStatusJson's}.
std::string dashboardJson(const std::vector<ProcessStatus>& ranks, int64_t nowUnixMs, int expectedRanks);

}  // namespace commhost::cli
