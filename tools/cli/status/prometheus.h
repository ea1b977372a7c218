// SPDX-License-Identifier: Apache-2.0
// The job's records (commhost/job_status.h) in Prometheus' text exposition format 0.0.4,
// for `commhost run --metrics`. Names and labels follow Prometheus' conventions (base
// units, _total for counters, one HELP and TYPE per family); every series has a `rank`
// label (the job's rank) and group series a `group` label.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "commhost/job_status.h"

namespace commhost::cli {

std::string prometheusText(const std::vector<ProcessStatus>& ranks, int64_t nowUnixMs);

}  // namespace commhost::cli
