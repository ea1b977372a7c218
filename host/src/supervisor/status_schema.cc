// SPDX-License-Identifier: Apache-2.0
// The job status schema (commhost/job_status.h): its one writer (encodeStatus, called by
// the status publisher) and its one reader (readJobStatus).
#include <nlohmann/json.hpp>

#include "commhost/errors.h"
#include "commhost/job_status.h"
#include "status.h"

namespace commhost {

// nlohmann's ADL hooks: the field names of the schema, each written and read here only.
static void to_json(nlohmann::json& j, const OpInFlight& o) {
  j = {{"op", o.op}, {"seq", o.seq}, {"backend", o.backend}, {"seconds", o.seconds}};
}
static void from_json(const nlohmann::json& j, OpInFlight& o) {
  j.at("op").get_to(o.op);
  j.at("seq").get_to(o.seq);
  j.at("backend").get_to(o.backend);
  j.at("seconds").get_to(o.seconds);
}

static void to_json(nlohmann::json& j, const GroupStatus& g) {
  j = {{"name", g.name},
       {"rank", g.rank},
       {"world_size", g.worldSize},
       {"global_ranks", g.globalRanks},
       {"generation", g.generation},
       {"config_hash", g.configHash},
       {"config_source", g.configSource},
       {"backends", g.backends},
       {"routes", g.routes},
       {"last_issued_seq", g.lastIssuedSeq},
       {"last_issued_op", g.lastIssuedOp},
       {"last_completed_seq", g.lastCompletedSeq},
       {"in_flight", g.inFlight},
       {"oldest", g.oldest ? nlohmann::json(*g.oldest) : nlohmann::json()},
       {"heartbeat_age", nlohmann::json::object()},
       {"lost_peers", nlohmann::json::object()},
       {"left_peers", g.leftPeers}};
  // JSON object keys are strings: peers as decimal text.
  for (const auto& [peer, age] : g.heartbeatAge) j["heartbeat_age"][std::to_string(peer)] = age;
  for (const auto& [peer, why] : g.lostPeers) j["lost_peers"][std::to_string(peer)] = why;
}
static void from_json(const nlohmann::json& j, GroupStatus& g) {
  j.at("name").get_to(g.name);
  j.at("rank").get_to(g.rank);
  j.at("world_size").get_to(g.worldSize);
  j.at("global_ranks").get_to(g.globalRanks);
  j.at("generation").get_to(g.generation);
  j.at("config_hash").get_to(g.configHash);
  j.at("config_source").get_to(g.configSource);
  j.at("backends").get_to(g.backends);
  j.at("routes").get_to(g.routes);
  j.at("last_issued_seq").get_to(g.lastIssuedSeq);
  j.at("last_issued_op").get_to(g.lastIssuedOp);
  j.at("last_completed_seq").get_to(g.lastCompletedSeq);
  j.at("in_flight").get_to(g.inFlight);
  if (!j.at("oldest").is_null()) g.oldest = j.at("oldest").get<OpInFlight>();
  for (const auto& [peer, age] : j.at("heartbeat_age").items()) g.heartbeatAge[std::stoi(peer)] = age.get<double>();
  for (const auto& [peer, why] : j.at("lost_peers").items()) g.lostPeers[std::stoi(peer)] = why.get<std::string>();
  j.at("left_peers").get_to(g.leftPeers);
}

static void to_json(nlohmann::json& j, const StatusEvent& e) {
  j = {{"id", e.id}, {"unix_ms", e.unixMs}, {"kind", e.kind}, {"group", e.group}, {"text", e.text}};
}
static void from_json(const nlohmann::json& j, StatusEvent& e) {
  j.at("id").get_to(e.id);
  j.at("unix_ms").get_to(e.unixMs);
  j.at("kind").get_to(e.kind);
  j.at("group").get_to(e.group);
  j.at("text").get_to(e.text);
}

static void to_json(nlohmann::json& j, const OpStat& s) {
  j = {{"group", s.group},         {"op", s.op},         {"backend", s.backend}, {"size_class", s.sizeClass},
       {"completed", s.completed}, {"failed", s.failed}, {"bytes", s.bytes},     {"latency_sum_us", s.latencySumUs},
       {"buckets", s.buckets}};
}
static void from_json(const nlohmann::json& j, OpStat& s) {
  j.at("group").get_to(s.group);
  j.at("op").get_to(s.op);
  j.at("backend").get_to(s.backend);
  j.at("size_class").get_to(s.sizeClass);
  j.at("completed").get_to(s.completed);
  j.at("failed").get_to(s.failed);
  j.at("bytes").get_to(s.bytes);
  j.at("latency_sum_us").get_to(s.latencySumUs);
  j.at("buckets").get_to(s.buckets);
}

static void to_json(nlohmann::json& j, const ShadowTally& s) {
  j = {{"group", s.group},       {"op", s.op},        {"backend", s.backend}, {"shadow", s.shadow}, {"agree", s.agree},
       {"disagree", s.disagree}, {"failed", s.failed}};
}
static void from_json(const nlohmann::json& j, ShadowTally& s) {
  j.at("group").get_to(s.group);
  j.at("op").get_to(s.op);
  j.at("backend").get_to(s.backend);
  j.at("shadow").get_to(s.shadow);
  j.at("agree").get_to(s.agree);
  j.at("disagree").get_to(s.disagree);
  j.at("failed").get_to(s.failed);
}

static void to_json(nlohmann::json& j, const ProcessStatus& p) {
  j = {{"version", p.version},
       {"rank", p.rank},
       {"host", p.host},
       {"pid", p.pid},
       {"published_unix_ms", p.publishedUnixMs},
       {"interval_ms", p.intervalMs},
       {"publish_cost_us", p.publishCostUs},
       {"groups", p.groups},
       {"events", p.events},
       {"event_counts", p.eventCounts},
       {"ops", p.ops},
       {"latency_buckets_us", p.latencyBucketsUs},
       {"ops_missed", p.opsMissed},
       {"shadows", p.shadows},
       {"store_requests", p.storeRequests},
       {"store_failures", p.storeFailures}};
}
static void from_json(const nlohmann::json& j, ProcessStatus& p) {
  j.at("version").get_to(p.version);
  j.at("rank").get_to(p.rank);
  j.at("host").get_to(p.host);
  j.at("pid").get_to(p.pid);
  j.at("published_unix_ms").get_to(p.publishedUnixMs);
  j.at("interval_ms").get_to(p.intervalMs);
  j.at("publish_cost_us").get_to(p.publishCostUs);
  j.at("groups").get_to(p.groups);
  j.at("events").get_to(p.events);
  j.at("event_counts").get_to(p.eventCounts);
  j.at("ops").get_to(p.ops);
  j.at("latency_buckets_us").get_to(p.latencyBucketsUs);
  j.at("ops_missed").get_to(p.opsMissed);
  j.at("shadows").get_to(p.shadows);
  if (j.contains("store_requests")) j.at("store_requests").get_to(p.storeRequests);  // absent in older records
  if (j.contains("store_failures")) j.at("store_failures").get_to(p.storeFailures);
}

namespace supervisor {

std::string statusKey(int globalRank) { return std::string(kStatusKeyPrefix) + std::to_string(globalRank); }

std::string encodeStatus(const ProcessStatus& status) { return nlohmann::json(status).dump(); }

}  // namespace supervisor

std::vector<ProcessStatus> readJobStatus(Store& jobStore, std::vector<std::string>* problems, int* worldSize) {
  std::vector<ProcessStatus> out;
  if (worldSize) *worldSize = 0;
  if (!jobStore.check({supervisor::kStatusWorldKey})) {
    if (problems)
      problems->push_back(
          "no rank of this job has published a status yet (ranks publish once per "
          "supervisor.heartbeat.interval while a group is alive, when supervisor.enabled is true)");
    return out;
  }
  const int64_t world = counterValue(supervisor::kStatusWorldKey, jobStore.get(supervisor::kStatusWorldKey));
  if (worldSize) *worldSize = static_cast<int>(world);
  std::vector<std::string> keys;
  std::vector<int> ranks;
  for (int r = 0; r < world; ++r) {
    const std::string key = supervisor::statusKey(r);
    if (jobStore.check({key})) {
      keys.push_back(key);
      ranks.push_back(r);
    } else if (problems) {
      problems->push_back("rank " + std::to_string(r) +
                          " has published no status (not started yet, or it has no "
                          "group with the supervisor on)");
    }
  }
  if (keys.empty()) return out;
  const std::vector<Bytes> values = jobStore.multiGet(keys);
  for (size_t i = 0; i < values.size(); ++i) {
    const std::string where = "rank " + std::to_string(ranks[i]) + "'s status (key " + keys[i] + ")";
    try {
      const nlohmann::json j = nlohmann::json::parse(toString(values[i]));
      const int version = j.at("version").get<int>();
      if (version != kJobStatusVersion) {
        if (problems)
          problems->push_back(where + " has version " + std::to_string(version) + "; this commhost reads version " +
                              std::to_string(kJobStatusVersion) + ": run the commhost of the job's own install");
        continue;
      }
      out.push_back(j.get<ProcessStatus>());
    } catch (const nlohmann::json::exception& e) {
      if (problems) problems->push_back(where + " is not a status record this commhost can read: " + e.what());
    }
  }
  return out;
}

std::string jobStatusJson(const std::vector<ProcessStatus>& statuses) {
  return nlohmann::json({{"version", kJobStatusVersion}, {"ranks", statuses}}).dump(2);
}

}  // namespace commhost
