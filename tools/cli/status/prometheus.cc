// SPDX-License-Identifier: Apache-2.0
#include "prometheus.h"

#include <cstdio>
#include <functional>
#include <sstream>
#include <tuple>

namespace commhost::cli {
namespace {

// A label value with \, " and newline escaped, as the format wants.
std::string escaped(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

using Labels = std::vector<std::pair<std::string, std::string>>;

std::string labelText(const Labels& labels) {
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i)
    out += (i ? "," : "") + labels[i].first + "=\"" + escaped(labels[i].second) + "\"";
  return out + "}";
}

std::string number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

class Writer {
 public:
  // One family: its HELP and TYPE once, then `series` writes its samples.
  void family(const std::string& name, const char* type, const std::string& help, const std::function<void()>& series) {
    out_ << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
    series();
  }
  void sample(const std::string& name, const Labels& labels, double value) {
    out_ << name << labelText(labels) << " " << number(value) << "\n";
  }
  std::string text() const { return out_.str(); }

 private:
  std::ostringstream out_;
};

Labels groupLabels(const ProcessStatus& p, const GroupStatus& g) {
  return {{"group", g.name}, {"rank", std::to_string(p.rank)}};
}

Labels opLabels(const ProcessStatus& p, const OpStat& s) {
  return {{"group", s.group},
          {"rank", std::to_string(p.rank)},
          {"op", s.op},
          {"backend", s.backend},
          {"size_class", s.sizeClass}};
}

void processFamilies(Writer& w, const std::vector<ProcessStatus>& ranks, int64_t nowUnixMs) {
  w.family("commhost_rank_info", "gauge", "A rank's process: always 1, with its host and pid.", [&] {
    for (const auto& p : ranks)
      w.sample("commhost_rank_info",
               {{"rank", std::to_string(p.rank)}, {"host", p.host}, {"pid", std::to_string(p.pid)}}, 1);
  });
  w.family("commhost_status_age_seconds", "gauge", "Seconds since the rank last published its status.", [&] {
    for (const auto& p : ranks)
      w.sample("commhost_status_age_seconds", {{"rank", std::to_string(p.rank)}},
               static_cast<double>(nowUnixMs - p.publishedUnixMs) / 1000.0);
  });
  w.family("commhost_status_publish_seconds", "gauge", "What building and writing one status record cost the rank.",
           [&] {
             for (const auto& p : ranks)
               w.sample("commhost_status_publish_seconds", {{"rank", std::to_string(p.rank)}}, p.publishCostUs / 1e6);
           });
  w.family("commhost_ops_unlabelled_total", "counter",
           "Ops that left the flight recorder before the statistics read them (counted without labels).", [&] {
             for (const auto& p : ranks)
               w.sample("commhost_ops_unlabelled_total", {{"rank", std::to_string(p.rank)}},
                        static_cast<double>(p.opsMissed));
           });
}

void groupFamilies(Writer& w, const std::vector<ProcessStatus>& ranks) {
  const auto each = [&](const std::string& name, const char* type, const std::string& help,
                        const std::function<double(const GroupStatus&)>& value) {
    w.family(name, type, help, [&] {
      for (const auto& p : ranks)
        for (const auto& g : p.groups) w.sample(name, groupLabels(p, g), value(g));
    });
  };
  each("commhost_group_generation", "gauge", "The group's config generation (swaps and membership changes).",
       [](const GroupStatus& g) { return static_cast<double>(g.generation); });
  each("commhost_group_world_size", "gauge", "Ranks in the group.",
       [](const GroupStatus& g) { return static_cast<double>(g.worldSize); });
  each("commhost_group_last_issued_seq", "gauge", "Seq of the last collective the rank issued.",
       [](const GroupStatus& g) { return static_cast<double>(g.lastIssuedSeq); });
  each("commhost_group_last_completed_seq", "gauge", "Seq of the last collective the rank completed.",
       [](const GroupStatus& g) { return static_cast<double>(g.lastCompletedSeq); });
  each("commhost_group_in_flight", "gauge", "Works issued and not completed.",
       [](const GroupStatus& g) { return static_cast<double>(g.inFlight); });
  each("commhost_group_oldest_in_flight_seconds", "gauge", "Age of the oldest work in flight (0: none).",
       [](const GroupStatus& g) { return g.oldest ? g.oldest->seconds : 0.0; });
  each("commhost_group_peers_lost", "gauge", "Peers this rank knows are lost.",
       [](const GroupStatus& g) { return static_cast<double>(g.lostPeers.size()); });
  w.family("commhost_heartbeat_age_seconds", "gauge", "Seconds since a watched peer's heartbeat last moved.", [&] {
    for (const auto& p : ranks)
      for (const auto& g : p.groups)
        for (const auto& [peer, age] : g.heartbeatAge) {
          Labels l = groupLabels(p, g);
          l.emplace_back("peer", std::to_string(peer));
          w.sample("commhost_heartbeat_age_seconds", l, age);
        }
  });
}

void opFamilies(Writer& w, const std::vector<ProcessStatus>& ranks) {
  const auto each = [&](const std::string& name, const std::string& help,
                        const std::function<double(const OpStat&)>& value) {
    w.family(name, "counter", help, [&] {
      for (const auto& p : ranks)
        for (const auto& s : p.ops) w.sample(name, opLabels(p, s), value(s));
    });
  };
  each("commhost_ops_total", "Ops completed, per group, op, backend and size class.",
       [](const OpStat& s) { return static_cast<double>(s.completed); });
  each("commhost_ops_failed_total", "Ops that failed.", [](const OpStat& s) { return static_cast<double>(s.failed); });
  each("commhost_op_bytes_total", "Bytes of the completed ops (each rank's own buffer).",
       [](const OpStat& s) { return static_cast<double>(s.bytes); });
  w.family("commhost_op_latency_seconds", "histogram",
           "Issue to completion of the completed ops that were timed: every op of 64 KiB or more, and of the smaller "
           "ones a sample (supervisor.flight_recorder.time_every) and those that ran on after their call (from the "
           "call's return).",
           [&] {
             for (const auto& p : ranks)
               for (const auto& s : p.ops) {
                 uint64_t cumulative = 0;
                 for (size_t b = 0; b < s.buckets.size(); ++b) {
                   cumulative += s.buckets[b];
                   Labels l = opLabels(p, s);
                   l.emplace_back("le", b < p.latencyBucketsUs.size()
                                            ? number(static_cast<double>(p.latencyBucketsUs[b]) / 1e6)
                                            : "+Inf");
                   w.sample("commhost_op_latency_seconds_bucket", l, static_cast<double>(cumulative));
                 }
                 w.sample("commhost_op_latency_seconds_sum", opLabels(p, s), static_cast<double>(s.latencySumUs) / 1e6);
                 // The observations the buckets hold (OpStat::timed): counted, so that a record
                 // without `timed` (an older build) still gives a consistent histogram.
                 w.sample("commhost_op_latency_seconds_count", opLabels(p, s), static_cast<double>(cumulative));
               }
           });
}

void eventFamilies(Writer& w, const std::vector<ProcessStatus>& ranks) {
  w.family("commhost_shadow_calls_total", "counter", "Sampled calls compared with a route's shadow backend.", [&] {
    for (const auto& p : ranks)
      for (const auto& t : p.shadows)
        for (const auto& [outcome, n] :
             {std::pair<const char*, uint64_t>{"agree", t.agree}, {"disagree", t.disagree}, {"failed", t.failed}})
          w.sample("commhost_shadow_calls_total",
                   {{"group", t.group},
                    {"rank", std::to_string(p.rank)},
                    {"op", t.op},
                    {"backend", t.backend},
                    {"shadow", t.shadow},
                    {"outcome", outcome}},
                   static_cast<double>(n));
  });
  w.family("commhost_events_total", "counter",
           "Events since the rank started: peer_lost, swap_started, swap_committed, swap_rolled_back, membership, "
           "incident, shadow_disagree, shadow_failed, rerouted.",
           [&] {
             for (const auto& p : ranks)
               for (const auto& [kind, n] : p.eventCounts)
                 w.sample("commhost_events_total", {{"rank", std::to_string(p.rank)}, {"kind", kind}},
                          static_cast<double>(n));
           });
}

// The job's store as each rank used it: calls by op, and the calls that failed.
void storeFamilies(Writer& w, const std::vector<ProcessStatus>& ranks) {
  using Counts = std::map<std::string, uint64_t> ProcessStatus::*;
  for (const auto& [name, help, counts] :
       {std::tuple<const char*, const char*, Counts>{"commhost_store_requests_total",
                                                     "Calls the rank made to the job's store, by op.",
                                                     &ProcessStatus::storeRequests},
        {"commhost_store_request_failures_total", "Calls to the job's store that failed (timeouts included), by op.",
         &ProcessStatus::storeFailures}})
    w.family(name, "counter", help, [&, name = name, counts = counts] {
      for (const auto& p : ranks)
        for (const auto& [op, n] : p.*counts)
          w.sample(name, {{"rank", std::to_string(p.rank)}, {"op", op}}, static_cast<double>(n));
    });
}

}  // namespace

std::string prometheusText(const std::vector<ProcessStatus>& ranks, int64_t nowUnixMs) {
  Writer w;
  processFamilies(w, ranks, nowUnixMs);
  groupFamilies(w, ranks);
  opFamilies(w, ranks);
  eventFamilies(w, ranks);
  storeFamilies(w, ranks);
  return w.text();
}

}  // namespace commhost::cli
