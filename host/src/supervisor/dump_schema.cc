// SPDX-License-Identifier: Apache-2.0
// The flight-recorder dump schema (commhost/flight_dump.h): its one writer and one reader.
//
// Each type's JSON names are listed once, in its overload of fields() (json_fields.h). The
// reader is lenient: a field absent from a dump keeps its default (older dumps of the same
// version lack "swaps", "memberships", "shadows"); a field present with the wrong type throws.
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "commhost/errors.h"
#include "commhost/flight_dump.h"
#include "json_fields.h"

namespace commhost {

namespace {

using schema::FieldReader;
using schema::FieldWriter;
using schema::Json;
template <class T, class Type> using Schema = schema::Of<T, Type>;

template <class F, class T> Schema<T, DumpOp> fields(F& f, T& o) {
  f("id", o.id);
  f("group", o.group);
  f("rank", o.rank);
  f("world_size", o.worldSize);
  f("seq", o.seq);
  f("generation", o.generation);
  f("op", o.op);
  f("backend", o.backend);
  f("dtype", o.dtype);
  f("bytes", o.bytes);
  f("numel", o.numel);
  f("state", o.state);
  f("scheduled_us", o.scheduledUs);
  f("started_us", o.startedUs);
  f("ended_us", o.endedUs);
  f.optional("timed", o.timed, true);
  f.optional("device_ms", o.deviceMs, -1.0);
  f.optional("error", o.error, std::string());
}

template <class F, class T> Schema<T, SwapRecord> fields(F& f, T& s) {
  f("group", s.group);
  f("rank", s.rank);
  f("from_generation", s.fromGeneration);
  f("to_generation", s.toGeneration);
  f("outcome", s.outcome);
  f("started_us", s.startedUs);
  f("check_us", s.checkUs);
  f("drain_us", s.drainUs);
  f("build_us", s.buildUs);
  f("commit_us", s.commitUs);
  f("total_us", s.totalUs);
  f("kept", s.kept);
  f("built", s.built);
  f("removed", s.removed);
  f.optional("error", s.error, std::string());
  f.optional("rerouted", s.rerouted, std::vector<std::string>());
}

template <class F, class T> Schema<T, MembershipRecord> fields(F& f, T& m) {
  f("group", m.group);
  f("rank_before", m.rankBefore);
  f("rank_after", m.rankAfter);
  f("world_before", m.worldBefore);
  f("world_after", m.worldAfter);
  f("from_generation", m.fromGeneration);
  f("to_generation", m.toGeneration);
  f("removed", m.removed);
  f("outcome", m.outcome);
  f("started_us", m.startedUs);
  f("agree_us", m.agreeUs);
  f("build_us", m.buildUs);
  f("confirm_us", m.confirmUs);
  f("commit_us", m.commitUs);
  f("total_us", m.totalUs);
  f.optional("error", m.error, std::string());
}

template <class F, class T> Schema<T, ShadowEvent> fields(F& f, T& e) {
  f("group", e.group);
  f("rank", e.rank);
  f("seq", e.seq);
  f("op", e.op);
  f("bytes", e.bytes);
  f("backend", e.backend);
  f("shadow", e.shadow);
  f("outcome", e.outcome);
  f("backend_us", e.backendUs);
  f("shadow_us", e.shadowUs);
  f.optional("detail", e.detail, std::string());
}

template <class F, class T> Schema<T, DumpGroup> fields(F& f, T& g) {
  f("name", g.name);
  f("rank", g.rank);
  f("world_size", g.worldSize);
  f("global_ranks", g.globalRanks);
  f("last_issued", g.lastIssued);
  f("last_completed", g.lastCompleted);
  f("lost_peers", g.lostPeers);
  f("left_peers", g.leftPeers);
}

template <class F, class T> Schema<T, FlightDump> fields(F& f, T& d) {
  f("version", d.version);
  f("reason", d.reason);
  f("rank", d.rank);
  f("pid", d.pid);
  f("host", d.host);
  f("time_us", d.timeUs);
  f("entries_capacity", d.entriesCapacity);
  f("groups", d.groups);
  f("entries", d.entries);
  f("swaps", d.swaps);
  f("memberships", d.memberships);
  f("shadows", d.shadows);
}

template <class T> void write(Json& j, const T& x) {
  FieldWriter w{j = Json::object()};
  fields(w, x);
}
template <class T> void read(const Json& j, T& x) {
  if (!j.is_object()) throw std::invalid_argument(std::string("expected an object, found ") + j.type_name());
  FieldReader r{j};
  fields(r, x);
}

}  // namespace

// nlohmann's ADL hooks, so the lists above nest (a dump's vector of ops, of groups, ...):
// one pair for every type that has a field list.
template <class T, class = decltype(fields(std::declval<FieldWriter&>(), std::declval<const T&>()))>
static void to_json(Json& j, const T& x) {
  write(j, x);
}
template <class T, class = decltype(fields(std::declval<FieldReader&>(), std::declval<T&>()))>
static void from_json(const Json& j, T& x) {
  read(j, x);
}

const DumpGroup* FlightDump::group(const std::string& name) const {
  for (const auto& g : groups)
    if (g.name == name) return &g;
  return nullptr;
}

std::string encodeFlightDump(const FlightDump& dump) {
  Json j;
  write(j, dump);
  // replace: an error message from a backend need not be valid UTF-8.
  return j.dump(1, ' ', false, Json::error_handler_t::replace);
}

std::optional<FlightDump> decodeFlightDump(const std::string& text, const std::string& where) {
  Json j;
  try {
    j = Json::parse(text);
  } catch (const std::exception& e) {
    throw InvalidArgument("trace: " + where + " is not valid JSON (" + e.what() + "); remove it or re-dump that rank");
  }
  if (!j.is_object() || !j.contains("entries") || !j.contains("rank")) return std::nullopt;  // not a dump
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int>() != kFlightDumpVersion)
    throw InvalidArgument("trace: " + where + " is a flight recorder dump of version " +
                          (j.contains("version") ? j["version"].dump() : std::string("(none)")) +
                          " but this commhost reads version " + std::to_string(kFlightDumpVersion) +
                          "; read it with the commhost that wrote it, or remove it");
  FlightDump dump;
  try {
    read(j, dump);
  } catch (const std::exception& e) {  // a field of the wrong type, a peer that is not a number
    throw InvalidArgument("trace: " + where + " is not a flight recorder dump (" + e.what() +
                          "); remove it or re-dump that rank");
  }
  return dump;
}

}  // namespace commhost
