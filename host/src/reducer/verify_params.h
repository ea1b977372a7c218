// SPDX-License-Identifier: Apache-2.0
// The Reducer's internal helpers shared between its source files.
#pragma once

#include <vector>

#include "commhost/reducer.h"

namespace commhost::reducer {

// c10d's verify_params_across_processes: collective over `group`. Every rank gathers a
// fixed-size digest of every rank's parameter list; when they differ, the per-parameter
// descriptions, so that each rank throws InvalidArgument naming the first differing
// parameter index and which ranks have what.
void verifyParamsAcrossRanks(ProcessGroup& group, const std::vector<ParamInfo>& params);

// "param 3 'fc1.weight'" (or "param 3" when unnamed), for messages.
std::string describeParam(const std::vector<ParamInfo>& params, size_t index);

}  // namespace commhost::reducer
