// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the supervisor's cross-rank codec (host/src/supervisor/messages.h):
// build with clang and -DCOMMHOST_FUZZ=ON, then run build/bin/commhost_fuzz_supervisor_messages.
// Any input must decode or return an error; what decodes must encode back to a line that
// decodes to the same message. A crash or sanitizer report is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "supervisor/messages.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace commhost::supervisor::wire;
  const std::string input(reinterpret_cast<const char*>(data), size);
  for (const auto& line : splitLines(input)) {
    const auto log = decodeLogLine(line);
    if (log && log.value.kind == LogLine::Kind::Incident) {
      const auto again = decodeLogLine(encode(log.value.incident));  // with its '\n': still strict
      const auto back = decodeLogLine(splitLines(encode(log.value.incident))[0]);
      if (again || !back || back.value.incident.rank != log.value.incident.rank ||
          back.value.incident.what != log.value.incident.what)
        std::abort();
    } else if (log) {
      const auto back = decodeLogLine(splitLines(encode(log.value.peerLost))[0]);
      if (!back || back.value.peerLost.peer != log.value.peerLost.peer) std::abort();
    } else if (log.error.empty()) {
      std::abort();
    }
    if (const auto ack = decodeAck(line); ack && ack.value < 0) std::abort();
    if (const auto p = decodeProgress(line); p && encode(p.value) != line) std::abort();
  }
  return 0;
}
