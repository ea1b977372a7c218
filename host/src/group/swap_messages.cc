// SPDX-License-Identifier: Apache-2.0
#include "swap_messages.h"

#include <nlohmann/json.hpp>

namespace commhost::swap {
namespace {

using nlohmann::json;

Bytes dump(json j) {
  j["v"] = kProtocolVersion;
  return toBytes(j.dump());
}

// The object in `value`, checked for this protocol version; `what` names the message.
json parse(const Bytes& value, const std::string& key, const char* what) {
  json j = json::parse(value.begin(), value.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("v"))
    throw StoreError("the swap's " + std::string(what) + " at store key '" + key +
                     "' is not a commhost swap message (" + std::to_string(value.size()) +
                     " bytes); another program wrote under this group's keys: give each job its own store or prefix");
  if (j["v"] != kProtocolVersion)
    throw StoreError("the swap's " + std::string(what) + " at store key '" + key + "' speaks swap protocol version " +
                     j["v"].dump() + ", this rank " + std::to_string(kProtocolVersion) +
                     ": every rank of a job must run the same commhost build");
  return j;
}

// A field of a message parse() accepted; a missing or mistyped one is the same refusal.
template <typename T> T field(const json& j, const char* name, const std::string& key) {
  try {
    return j.at(name).get<T>();
  } catch (const json::exception& e) {
    throw StoreError("the swap message at store key '" + key + "' lacks a valid '" + name + "' (" + e.what() +
                     "): every rank of a job must run the same commhost build");
  }
}

}  // namespace

Bytes encode(const CheckVote& vote) {
  return dump({{"verdict", static_cast<int>(vote.verdict)},
               {"hash", vote.hash},
               {"routes", vote.routes},
               {"builds", vote.builds},
               {"source", vote.source},
               {"why", vote.why}});
}

Bytes encode(const BuildReport& report) {
  return dump({{"kind", static_cast<int>(report.kind)}, {"code", static_cast<int>(report.code)}, {"why", report.why}});
}

Bytes encode(const Decision& decision) {
  return dump({{"commit", decision.commit}, {"rank", decision.rank}, {"why", decision.why}});
}

CheckVote decodeCheckVote(const Bytes& value, const std::string& key) {
  const json j = parse(value, key, "check vote");
  CheckVote vote;
  const int verdict = field<int>(j, "verdict", key);
  if (verdict < 0 || verdict > static_cast<int>(CheckVote::Verdict::BadShadow))
    throw StoreError("the swap's check vote at store key '" + key + "' has an unknown verdict " +
                     std::to_string(verdict) + ": every rank of a job must run the same commhost build");
  vote.verdict = static_cast<CheckVote::Verdict>(verdict);
  vote.hash = field<uint64_t>(j, "hash", key);
  vote.routes = field<uint64_t>(j, "routes", key);
  vote.builds = field<std::string>(j, "builds", key);
  vote.source = field<std::string>(j, "source", key);
  vote.why = field<std::string>(j, "why", key);
  return vote;
}

BuildReport decodeBuildReport(const Bytes& value, const std::string& key) {
  const json j = parse(value, key, "build report");
  BuildReport report;
  const int kind = field<int>(j, "kind", key);
  const int code = field<int>(j, "code", key);
  if (kind < 0 || kind > static_cast<int>(BuildReport::Kind::Abandoned) || code < 0 ||
      code > static_cast<int>(ErrorCode::NotSupported))
    throw StoreError("the swap's build report at store key '" + key + "' has an unknown kind " + std::to_string(kind) +
                     " or code " + std::to_string(code) + ": every rank of a job must run the same commhost build");
  report.kind = static_cast<BuildReport::Kind>(kind);
  report.code = static_cast<ErrorCode>(code);
  report.why = field<std::string>(j, "why", key);
  return report;
}

Decision decodeDecision(const Bytes& value, const std::string& key) {
  const json j = parse(value, key, "decision");
  Decision decision;
  decision.commit = field<bool>(j, "commit", key);
  decision.rank = field<int>(j, "rank", key);
  decision.why = field<std::string>(j, "why", key);
  return decision;
}

}  // namespace commhost::swap
