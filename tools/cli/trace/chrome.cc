// SPDX-License-Identifier: Apache-2.0
// `commhost trace export --chrome`: the Trace Event format Perfetto and chrome://tracing
// read. One process track per rank, one thread track per group, one slice per op.
#include <algorithm>
#include <map>

#include <nlohmann/json.hpp>

#include "dumps.h"

namespace commhost::cli::trace {

std::string chromeTrace(const std::vector<RankDump>& dumps) {
  int64_t origin = INT64_MAX;
  for (const auto& d : dumps)
    for (const auto& e : d.entries) origin = std::min(origin, e.scheduledUs);
  for (const auto& d : dumps)
    for (const auto& sw : d.swaps) origin = std::min(origin, sw.startedUs);
  nlohmann::json events = nlohmann::json::array();
  std::map<std::string, int> groupTrack;
  for (const auto& d : dumps) {
    for (const auto& e : d.entries) {
      if (!groupTrack.count(e.group)) groupTrack[e.group] = static_cast<int>(groupTrack.size()) + 1;
    }
  }
  std::map<std::pair<int, int>, bool> named;
  for (const auto& d : dumps) {
    events.push_back({{"ph", "M"},
                      {"name", "process_name"},
                      {"pid", d.rank},
                      {"args", {{"name", "rank " + std::to_string(d.rank)}}}});
    events.push_back(
        {{"ph", "M"}, {"name", "process_sort_index"}, {"pid", d.rank}, {"args", {{"sort_index", d.rank}}}});
    for (const auto& e : d.entries) {
      const int tid = groupTrack[e.group];
      if (!named[{d.rank, tid}]) {
        named[{d.rank, tid}] = true;
        events.push_back({{"ph", "M"},
                          {"name", "thread_name"},
                          {"pid", d.rank},
                          {"tid", tid},
                          {"args", {{"name", "group " + e.group + " (rank " + std::to_string(e.rank) + ")"}}}});
      }
      // An op still in flight at dump time runs to the dump.
      const int64_t end = e.endedUs ? e.endedUs : std::max(d.timeUs, e.startedUs);
      nlohmann::json args = {{"seq", e.seq},     {"backend", e.backend}, {"generation", e.generation},
                             {"dtype", e.dtype}, {"bytes", e.bytes},     {"numel", e.numel},
                             {"state", e.state}};
      if (!e.error.empty()) args["error"] = e.error;
      if (e.deviceMs >= 0) args["device_ms"] = e.deviceMs;
      if (!e.timed) args["timed"] = false;  // not its own time, drawn 1 us long
      events.push_back({{"ph", "X"},
                        {"name", e.op + " #" + std::to_string(e.seq)},
                        {"cat", e.state},
                        {"pid", d.rank},
                        {"tid", tid},
                        {"ts", e.scheduledUs - origin},
                        {"dur", std::max<int64_t>(end - e.scheduledUs, 1)},
                        {"args", args}});
    }
    // Hot swaps: one slice per swap on a track of their own, with the phase times.
    for (const auto& sw : d.swaps) {
      if (!named[{d.rank, 0}]) {
        named[{d.rank, 0}] = true;
        events.push_back(
            {{"ph", "M"}, {"name", "thread_name"}, {"pid", d.rank}, {"tid", 0}, {"args", {{"name", "hot swaps"}}}});
      }
      nlohmann::json args = {{"group", sw.group},
                             {"from_generation", sw.fromGeneration},
                             {"to_generation", sw.toGeneration},
                             {"check_us", sw.checkUs},
                             {"drain_us", sw.drainUs},
                             {"build_us", sw.buildUs},
                             {"commit_us", sw.commitUs}};
      if (!sw.error.empty()) args["error"] = sw.error;
      events.push_back({{"ph", "X"},
                        {"name", "swap " + sw.group + " " + std::to_string(sw.fromGeneration) + "->" +
                                     std::to_string(sw.toGeneration) + " (" + sw.outcome + ")"},
                        {"cat", "swap"},
                        {"pid", d.rank},
                        {"tid", 0},
                        {"ts", sw.startedUs - origin},
                        {"dur", std::max<int64_t>(sw.totalUs, 1)},
                        {"args", args}});
    }
  }
  nlohmann::json trace = {{"traceEvents", events},
                          {"displayTimeUnit", "ms"},
                          {"otherData", {{"generator", "commhost trace export"}, {"origin_us", origin}}}};
  return trace.dump();
}

}  // namespace commhost::cli::trace
