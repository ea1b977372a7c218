// SPDX-License-Identifier: Apache-2.0
// Supervisor: what commhost watches around every collective, whatever backend runs it.
//
// One supervisor per process serves every group (see DESIGN.md "Supervisor"). It keeps
// a flight recorder of the last collectives, fails works that pass their deadline or
// whose peer stopped beating, says which ranks never joined, and dumps its records as
// JSON (rank<N>.json in supervisor.flight_recorder.dump_dir) for `commhost trace`.
//
// Completion hooks receive one event per finished work (success or error). They run on
// the supervisor's hook thread, one at a time, in completion order; never on the
// caller's, a backend's or the watchdog's thread. A hook that throws is logged and kept.
// The end time is when the completion was first seen: by wait()/isCompleted() on the
// work, or by the watchdog's next poll.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "commhost/export.h"
#include "commhost/store.h"
#include "commhost/types.h"

namespace commhost {

// supervisor.on_error: teardown ends the process with this status after dumping.
constexpr int kTeardownExitStatus = 86;

struct CompletionEvent {
  std::string group;
  int rank = 0;
  OpType op = OpType::Allreduce;
  uint64_t seq = 0;
  std::string backend;
  std::chrono::system_clock::time_point start, end;
  std::chrono::microseconds duration{0};
  int64_t bytes = 0;
  std::string error;  // empty on success
  // The op's time on its device (Work::deviceMs()), when its backend timed it.
  std::optional<double> deviceMs;
};
using CompletionHook = std::function<void(const CompletionEvent&)>;

// Asks every rank of the job whose store this is to dump its flight recorder now (what
// `commhost trace dump` does). Returns at once; ranks dump within about 100 ms.
COMMHOST_API void requestTraceDump(Store& jobStore, const std::string& reason);

// Writes this process's flight recorder to the dump dir now; returns the file's path
// (empty when no group is alive in this process).
COMMHOST_API std::string dumpFlightRecorder(const std::string& reason);

// This process's flight recorder as the JSON text a dump holds (commhost/flight_dump.h), written nowhere (reading
// it must not overwrite an incident's dump); empty when no group is alive here.
COMMHOST_API std::string flightRecorderJson(const std::string& reason);

}  // namespace commhost
