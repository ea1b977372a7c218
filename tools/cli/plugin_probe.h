// SPDX-License-Identifier: Apache-2.0
// `commhost plugins list|inspect`: each candidate plugin file is loaded first in a child
// process, so a file whose loading hangs (a static initializer that waits) or crashes (one
// that aborts, a descriptor the checks cannot catch) is reported with its signal or the
// time it took, never fatal to the command. Jobs do not pay for this: they load in-process.
#pragma once

#include <chrono>
#include <string>

namespace commhost::cli {

// "" when loading `path` in a child returned (usable or not: the caller's own load says
// which), else why it must not be loaded in this process. Each call forks once and waits
// at most `limit`; when fork itself fails it returns "" (the caller loads as before).
std::string probeInChild(const std::string& path, std::chrono::milliseconds limit);

}  // namespace commhost::cli
