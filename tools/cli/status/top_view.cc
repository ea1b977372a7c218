// SPDX-License-Identifier: Apache-2.0
#include "top_view.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

namespace commhost::cli {
namespace {

// nccl-tests' bus factors, by op name (the bytes are each rank's own buffer).
double busFactor(const std::string& op, int world) {
  if (world <= 1) return 0;
  const double n = world;
  if (op.rfind("allreduce", 0) == 0) return 2 * (n - 1) / n;
  if (op.rfind("allgather", 0) == 0 || op.rfind("reduce_scatter", 0) == 0 || op.rfind("alltoall", 0) == 0)
    return (n - 1) / n;
  if (op == "barrier") return 0;
  return 1;
}

// Per op cell: what completed between the two readings.
struct Delta {
  uint64_t completed = 0, bytes = 0;
  std::vector<uint64_t> buckets;
  Delta() = default;
  Delta(const OpStat& now, const OpStat* before) {
    completed = now.completed - (before ? before->completed : 0);
    bytes = now.bytes - (before ? before->bytes : 0);
    buckets = now.buckets;
    for (size_t b = 0; before && b < before->buckets.size() && b < buckets.size(); ++b)
      buckets[b] -= before->buckets[b];
  }
  void add(const Delta& d) {
    completed += d.completed;
    bytes += d.bytes;
    buckets.resize(std::max(buckets.size(), d.buckets.size()));
    for (size_t b = 0; b < d.buckets.size(); ++b) buckets[b] += d.buckets[b];
  }
};

std::string opKey(const OpStat& s) { return s.group + " " + s.op + " " + s.backend; }

const ProcessStatus* sameProcess(const std::vector<ProcessStatus>& list, const ProcessStatus& p) {
  for (const auto& q : list)
    if (q.rank == p.rank && q.pid == p.pid && q.host == p.host) return &q;
  return nullptr;
}

const OpStat* sameCell(const ProcessStatus* p, const OpStat& s) {
  if (!p) return nullptr;
  for (const auto& t : p->ops)
    if (t.group == s.group && t.op == s.op && t.backend == s.backend && t.sizeClass == s.sizeClass) return &t;
  return nullptr;
}

std::string alertOf(const ProcessStatus& p, int64_t nowUnixMs) {
  const double silent = static_cast<double>(nowUnixMs - p.publishedUnixMs) / 1000.0;
  char buf[160];
  if (silent > std::max(3.0 * p.intervalMs, p.intervalMs + 2000.0) / 1000.0) {
    std::snprintf(buf, sizeof buf, "silent %.0f s", silent);
    return buf;
  }
  for (const auto& g : p.groups) {
    if (!g.lostPeers.empty()) return "lost " + std::to_string(g.lostPeers.begin()->first) + " in " + g.name;
    if (g.oldest && g.oldest->seconds >= 2) {
      std::snprintf(buf, sizeof buf, "%s %llu for %.0f s", g.oldest->op.c_str(),
                    static_cast<unsigned long long>(g.oldest->seq), g.oldest->seconds);
      return buf;
    }
  }
  return "";
}

void finish(TopRow& row, const Delta& d, const std::vector<int64_t>& bounds, double seconds) {
  row.opsPerSecond = static_cast<double>(d.completed) / seconds;
  row.bytesPerSecond = static_cast<double>(d.bytes) / seconds;
  row.p50Us = quantileUs(d.buckets, bounds, 0.5);
  row.p99Us = quantileUs(d.buckets, bounds, 0.99);
}

}  // namespace

double quantileUs(const std::vector<uint64_t>& counts, const std::vector<int64_t>& boundsUs, double q) {
  uint64_t total = 0;
  for (uint64_t c : counts) total += c;
  if (total == 0) return -1;
  const double target = q * static_cast<double>(total);
  double seen = 0;
  for (size_t b = 0; b < counts.size(); ++b) {
    if (counts[b] == 0) continue;
    if (seen + static_cast<double>(counts[b]) >= target) {
      const double lo = b == 0 ? 0 : static_cast<double>(boundsUs[std::min(b - 1, boundsUs.size() - 1)]);
      if (b >= boundsUs.size()) return lo;  // +Inf: the last bound is all that is known
      const double hi = static_cast<double>(boundsUs[b]);
      return lo + (hi - lo) * (target - seen) / static_cast<double>(counts[b]);
    }
    seen += static_cast<double>(counts[b]);
  }
  return boundsUs.empty() ? -1 : static_cast<double>(boundsUs.back());
}

TopFrame topFrame(const std::vector<ProcessStatus>& before, const std::vector<ProcessStatus>& now, double seconds,
                  int64_t nowUnixMs) {
  TopFrame f;
  std::map<std::string, std::pair<Delta, double>> ops;  // key -> (delta, bus bytes)
  seconds = std::max(seconds, 1e-3);
  for (const auto& p : now) {
    const ProcessStatus* was = sameProcess(before, p);
    TopRow row;
    row.key = "rank " + std::to_string(p.rank);
    row.rank = p.rank;
    Delta mine;
    double busBytes = 0;
    for (const auto& s : p.ops) {
      const Delta d(s, sameCell(was, s));
      int world = 1;
      for (const auto& g : p.groups)
        if (g.name == s.group) world = g.worldSize;
      const double bus = static_cast<double>(d.bytes) * busFactor(s.op, world);
      busBytes += bus;
      mine.add(d);
      auto& cell = ops[opKey(s)];
      cell.first.add(d);
      cell.second += bus;
    }
    finish(row, mine, p.latencyBucketsUs, seconds);
    row.busBytesPerSecond = busBytes / seconds;
    for (const auto& g : p.groups) {
      row.generation = std::max(row.generation, g.generation);
      row.inFlight += g.inFlight;
    }
    row.alert = alertOf(p, nowUnixMs);
    f.ranks.push_back(row);
  }
  const std::vector<int64_t> bounds = now.empty() ? std::vector<int64_t>{} : now.front().latencyBucketsUs;
  for (const auto& [key, cell] : ops) {
    TopRow row;
    row.key = key;
    finish(row, cell.first, bounds, seconds);
    row.busBytesPerSecond = cell.second / seconds;
    f.ops.push_back(row);
  }
  return f;
}

std::string renderTop(const TopFrame& frame, const std::string& summary) {
  std::ostringstream out;
  out << summary << "\n";
  const auto line = [&](const TopRow& r, bool rank) {
    char buf[320];
    const auto lat = [](double us) {
      char b[24];
      if (us < 0) return std::string("-");
      std::snprintf(b, sizeof b, us < 1000 ? "%.1fus" : "%.2fms", us < 1000 ? us : us / 1000);
      return std::string(b);
    };
    std::snprintf(buf, sizeof buf, "%-28s %5s %10.0f %10.3f %10.3f %10s %10s %5s  %s\n", r.key.c_str(),
                  rank ? std::to_string(r.generation).c_str() : "", r.opsPerSecond, r.bytesPerSecond / 1e9,
                  r.busBytesPerSecond / 1e9, lat(r.p50Us).c_str(), lat(r.p99Us).c_str(),
                  rank ? std::to_string(r.inFlight).c_str() : "", r.alert.c_str());
    out << buf;
  };
  char head[240];
  std::snprintf(head, sizeof head, "%-28s %5s %10s %10s %10s %10s %10s %5s  %s\n", "", "gen", "ops/s", "GB/s",
                "busbw GB/s", "p50", "p99", "infl", "alert");
  out << head;
  for (const auto& r : frame.ranks) line(r, true);
  out << "\n";
  for (const auto& r : frame.ops) line(r, false);
  return out.str();
}

}  // namespace commhost::cli
