// SPDX-License-Identifier: Apache-2.0
// The job status schema (commhost/job_status.h): its one writer (encodeStatus, called by
// the status publisher) and its one reader (readJobStatus).
#include <utility>

#include "commhost/errors.h"
#include "commhost/job_status.h"
#include "json_fields.h"
#include "status.h"

namespace commhost {

namespace {

using schema::FieldReader;
using schema::FieldWriter;
using schema::Json;
template <class T, class Type> using Schema = schema::Of<T, Type>;

// Each type's JSON names, once (json_fields.h). The reader is strict: a record lacking a
// field is not one this commhost can read, except for fields added within the version.
template <class F, class T> Schema<T, OpInFlight> fields(F& f, T& o) {
  f("op", o.op);
  f("seq", o.seq);
  f("backend", o.backend);
  f("seconds", o.seconds);
}

template <class F, class T> Schema<T, GroupStatus> fields(F& f, T& g) {
  f("name", g.name);
  f("rank", g.rank);
  f("world_size", g.worldSize);
  f("global_ranks", g.globalRanks);
  f("generation", g.generation);
  f("config_hash", g.configHash);
  f("config_source", g.configSource);
  f("backends", g.backends);
  f("routes", g.routes);
  f("last_issued_seq", g.lastIssuedSeq);
  f("last_issued_op", g.lastIssuedOp);
  f("last_completed_seq", g.lastCompletedSeq);
  f("in_flight", g.inFlight);
  f("oldest", g.oldest);
  f("heartbeat_age", g.heartbeatAge);
  f("lost_peers", g.lostPeers);
  f("left_peers", g.leftPeers);
}

template <class F, class T> Schema<T, StatusEvent> fields(F& f, T& e) {
  f("id", e.id);
  f("unix_ms", e.unixMs);
  f("kind", e.kind);
  f("group", e.group);
  f("text", e.text);
}

template <class F, class T> Schema<T, OpStat> fields(F& f, T& s) {
  f("group", s.group);
  f("op", s.op);
  f("backend", s.backend);
  f("size_class", s.sizeClass);
  f("completed", s.completed);
  f("failed", s.failed);
  f("bytes", s.bytes);
  f.added("timed", s.timed);
  f("latency_sum_us", s.latencySumUs);
  f("buckets", s.buckets);
}

template <class F, class T> Schema<T, ShadowTally> fields(F& f, T& s) {
  f("group", s.group);
  f("op", s.op);
  f("backend", s.backend);
  f("shadow", s.shadow);
  f("agree", s.agree);
  f("disagree", s.disagree);
  f("failed", s.failed);
}

template <class F, class T> Schema<T, ProcessStatus> fields(F& f, T& p) {
  f("version", p.version);
  f("rank", p.rank);
  f("host", p.host);
  f("pid", p.pid);
  f("published_unix_ms", p.publishedUnixMs);
  f("interval_ms", p.intervalMs);
  f("publish_cost_us", p.publishCostUs);
  f("groups", p.groups);
  f("events", p.events);
  f("event_counts", p.eventCounts);
  f("ops", p.ops);
  f("latency_buckets_us", p.latencyBucketsUs);
  f("ops_missed", p.opsMissed);
  f("shadows", p.shadows);
  f.added("store_requests", p.storeRequests);
  f.added("store_failures", p.storeFailures);
}

template <class T> void write(Json& j, const T& x) {
  FieldWriter w{j = Json::object()};
  fields(w, x);
}
template <class T> void read(const Json& j, T& x) {
  FieldReader r{j, true};
  fields(r, x);
}

}  // namespace

// nlohmann's ADL hooks, so the lists above nest: one pair for every type with a field list.
template <class T, class = decltype(fields(std::declval<FieldWriter&>(), std::declval<const T&>()))>
static void to_json(Json& j, const T& x) {
  write(j, x);
}
template <class T, class = decltype(fields(std::declval<FieldReader&>(), std::declval<T&>()))>
static void from_json(const Json& j, T& x) {
  read(j, x);
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
