// SPDX-License-Identifier: Apache-2.0
#include "dumps.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "commhost/errors.h"
#include "commhost/supervisor.h"

namespace commhost::cli::trace {

namespace {

Membership parseMembership(const nlohmann::json& e) {
  Membership m;
  m.group = e.value("group", "");
  m.outcome = e.value("outcome", "");
  m.error = e.value("error", "");
  m.rankBefore = e.value("rank_before", 0);
  m.rankAfter = e.value("rank_after", -1);
  m.worldBefore = e.value("world_before", 0);
  m.worldAfter = e.value("world_after", 0);
  m.fromGeneration = e.value("from_generation", uint64_t(0));
  m.toGeneration = e.value("to_generation", uint64_t(0));
  m.removed = e.value("removed", std::vector<int>{});
  m.startedUs = e.value("started_us", int64_t(0));
  m.agreeUs = e.value("agree_us", int64_t(0));
  m.buildUs = e.value("build_us", int64_t(0));
  m.confirmUs = e.value("confirm_us", int64_t(0));
  m.commitUs = e.value("commit_us", int64_t(0));
  m.totalUs = e.value("total_us", int64_t(0));
  return m;
}

// One dump's fields. A field of the wrong type (a hand-edited or foreign file) throws
// nlohmann::json::exception, which loadDumps turns into an error naming the file.
RankDump parseDump(const nlohmann::json& j, const std::string& path) {
  RankDump d;
  d.path = path;
  d.rank = j.value("rank", -1);
  d.pid = j.value("pid", 0);
  d.host = j.value("host", "");
  d.reason = j.value("reason", "");
  d.timeUs = j.value("time_us", int64_t(0));
  for (const auto& g : j.value("groups", nlohmann::json::array())) {
    const std::string name = g.value("name", "");
    d.groupRank[name] = g.value("rank", 0);
    d.groupSize[name] = g.value("world_size", 0);
    // Held in a local: items() of a temporary would outlive the temporary in the loop.
    const nlohmann::json lost = g.value("lost_peers", nlohmann::json::object());
    for (const auto& [peer, why] : lost.items()) d.lostPeers[name + ": peer " + peer] = why.get<std::string>();
  }
  for (const auto& e : j["entries"]) {
    Entry x;
    x.group = e.value("group", "");
    x.op = e.value("op", "");
    x.backend = e.value("backend", "");
    x.dtype = e.value("dtype", "");
    x.state = e.value("state", "");
    x.error = e.value("error", "");
    x.rank = e.value("rank", 0);
    x.worldSize = e.value("world_size", 0);
    x.seq = e.value("seq", uint64_t(0));
    x.generation = e.value("generation", uint64_t(0));
    x.bytes = e.value("bytes", int64_t(0));
    x.numel = e.value("numel", int64_t(0));
    x.scheduledUs = e.value("scheduled_us", int64_t(0));
    x.startedUs = e.value("started_us", int64_t(0));
    x.endedUs = e.value("ended_us", int64_t(0));
    x.deviceMs = e.value("device_ms", -1.0);  // only device works a backend timed have it
    d.entries.push_back(std::move(x));
  }
  for (const auto& e : j.value("swaps", nlohmann::json::array())) {  // absent in dumps before hot swap
    Swap s;
    s.group = e.value("group", "");
    s.outcome = e.value("outcome", "");
    s.error = e.value("error", "");
    s.rank = e.value("rank", 0);
    s.fromGeneration = e.value("from_generation", uint64_t(0));
    s.toGeneration = e.value("to_generation", uint64_t(0));
    s.startedUs = e.value("started_us", int64_t(0));
    s.checkUs = e.value("check_us", int64_t(0));
    s.drainUs = e.value("drain_us", int64_t(0));
    s.buildUs = e.value("build_us", int64_t(0));
    s.commitUs = e.value("commit_us", int64_t(0));
    s.totalUs = e.value("total_us", int64_t(0));
    d.swaps.push_back(std::move(s));
  }
  for (const auto& e : j.value("memberships", nlohmann::json::array()))  // absent in dumps before shrink
    d.memberships.push_back(parseMembership(e));
  for (const auto& e : j.value("shadows", nlohmann::json::array())) {  // absent in dumps before shadow mode
    ShadowRun s;
    s.group = e.value("group", "");
    s.op = e.value("op", "");
    s.backend = e.value("backend", "");
    s.shadow = e.value("shadow", "");
    s.outcome = e.value("outcome", "");
    s.detail = e.value("detail", "");
    s.rank = e.value("rank", 0);
    s.seq = e.value("seq", uint64_t(0));
    s.bytes = e.value("bytes", int64_t(0));
    s.backendUs = e.value("backend_us", int64_t(0));
    s.shadowUs = e.value("shadow_us", int64_t(0));
    d.shadows.push_back(std::move(s));
  }
  return d;
}

}  // namespace

std::vector<RankDump> loadDumps(const std::string& dir) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir))
    throw InvalidArgument("trace: " + dir + " is not a directory; pass supervisor.flight_recorder.dump_dir");
  std::vector<RankDump> out;
  for (const auto& file : fs::directory_iterator(dir)) {
    if (file.path().extension() != ".json") continue;
    std::ifstream in(file.path());
    nlohmann::json j;
    try {
      in >> j;
    } catch (const std::exception& e) {
      throw InvalidArgument("trace: " + file.path().string() + " is not valid JSON (" + e.what() +
                            "); remove it or re-dump that rank");
    }
    if (!j.is_object() || !j.contains("entries") || !j.contains("rank")) continue;  // not a dump
    if (j.value("version", 0) != kFlightRecorderDumpVersion)
      throw InvalidArgument("trace: " + file.path().string() + " is a flight recorder dump of version " +
                            (j.contains("version") ? j["version"].dump() : std::string("(none)")) +
                            " but this commhost reads version " + std::to_string(kFlightRecorderDumpVersion) +
                            "; read it with the commhost that wrote it, or remove it");
    try {
      out.push_back(parseDump(j, file.path().string()));
    } catch (const nlohmann::json::exception& e) {
      throw InvalidArgument("trace: " + file.path().string() + " is not a flight recorder dump (" + e.what() +
                            "); remove it or re-dump that rank");
    }
  }
  if (out.empty())
    throw InvalidArgument("trace: no flight recorder dumps (rank<N>.json) in " + dir +
                          "; dumps appear on a timeout or error, on SIGUSR1, or with `commhost trace dump`");
  std::sort(out.begin(), out.end(), [](const RankDump& a, const RankDump& b) { return a.rank < b.rank; });
  return out;
}

}  // namespace commhost::cli::trace
