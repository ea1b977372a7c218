// SPDX-License-Identifier: Apache-2.0
// `commhost trace analyze`: merges the ranks' flight recorders and names the first
// collective where they diverge: a rank that never issued it, ranks that disagree on
// op/dtype/size, or a collective every rank issued but not all completed; or says the
// dumps show no problem when they differ only as a running job's do (describeSkew).
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "dumps.h"

namespace commhost::cli::trace {
namespace {

std::string list(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i) out += i + 1 == ranks.size() ? " and " : ", ";
    out += std::to_string(ranks[i]);
  }
  return out;
}

std::string plural(const std::vector<int>& ranks) { return ranks.size() > 1 ? "Ranks " : "Rank "; }

// The generation is part of the call: ranks that routed one seq by different configs
// (one swapped, another did not) diverge there.
std::string signature(const DumpOp& e) {
  return e.op + " " + e.dtype + "[" + std::to_string(e.numel) + "]" +
         (e.generation ? " (config generation " + std::to_string(e.generation) + ")" : "");
}

// "Group G: N hot swaps; rank R's last: generation F -> T committed (check ... ms)", and
// each rank whose last swap ended otherwise.
std::string describeSwaps(const std::vector<RankDump>& dumps) {
  std::map<std::string, std::map<int, const SwapRecord*>> last;  // group -> group rank -> its last swap
  std::map<std::string, size_t> count;
  for (const auto& d : dumps)
    for (const auto& s : d.swaps) {
      if (s.outcome == "rerouted") continue;  // describeReroutes
      last[s.group][s.rank] = &s;
      ++count[s.group];
    }
  std::ostringstream out;
  const auto ms = [](int64_t us) { return std::to_string(us / 1000) + "." + std::to_string(us % 1000 / 100); };
  for (const auto& [group, byRank] : last) {
    out << "Group " << group << ": " << count[group] << " hot swap record" << (count[group] > 1 ? "s" : "")
        << " (all ranks); the last on each rank:";
    for (const auto& [rank, s] : byRank) {
      out << "\n  rank " << rank << ": generation " << s->fromGeneration << " -> " << s->toGeneration << " "
          << s->outcome << " (check " << ms(s->checkUs) << " ms, drain " << ms(s->drainUs) << " ms, build "
          << ms(s->buildUs) << " ms, commit " << ms(s->commitUs) << " ms)";
      if (!s->error.empty()) out << ": " << s->error.substr(0, 300);
    }
    out << "\n";
  }
  return out.str();
}

// "Group G: live routing (tune: live) changed the routes N times; rank R's record:" and a
// line per size class moved or settled and per candidate dropped. Every rank decides alike: the lowest rank's
// record stands for all.
std::string describeReroutes(const std::vector<RankDump>& dumps) {
  std::map<std::string, std::pair<int, std::vector<const SwapRecord*>>> byGroup;  // group -> (rank, records)
  for (const auto& d : dumps)
    for (const auto& s : d.swaps) {
      if (s.outcome != "rerouted") continue;
      auto it = byGroup.emplace(s.group, std::make_pair(s.rank, std::vector<const SwapRecord*>{})).first;
      if (s.rank < it->second.first) it->second = {s.rank, {}};
      if (s.rank == it->second.first) it->second.second.push_back(&s);
    }
  std::ostringstream out;
  for (const auto& [group, ranked] : byGroup) {
    out << "Group " << group << ": live routing (tune: live) changed the routes " << ranked.second.size() << " time"
        << (ranked.second.size() > 1 ? "s" : "") << "; rank " << ranked.first << "'s record:";
    for (const SwapRecord* s : ranked.second)
      for (const auto& line : s->rerouted)
        out << "\n  generation " << s->fromGeneration << " -> " << s->toGeneration << ": " << line;
    out << "\n";
  }
  return out.str();
}

// "Group G: rank R shrank 4 -> 3 ranks at generation F -> T (removed 2; agree ... ms)", one
// line per membership change each rank recorded.
std::string describeMemberships(const std::vector<RankDump>& dumps) {
  std::ostringstream out;
  const auto ms = [](int64_t us) { return std::to_string(us / 1000) + "." + std::to_string(us % 1000 / 100); };
  for (const auto& d : dumps)
    for (const auto& m : d.memberships) {
      std::string removed;
      for (int r : m.removed) removed += (removed.empty() ? "" : ", ") + std::to_string(r);
      out << "Group " << m.group << ": rank " << d.rank << " (group rank " << m.rankBefore;
      if (m.rankAfter >= 0 && m.rankAfter != m.rankBefore) out << " -> " << m.rankAfter;
      out << ") " << m.outcome << " " << m.worldBefore << " -> " << m.worldAfter << " ranks, generation "
          << m.fromGeneration << " -> " << m.toGeneration << " (removed: " << (removed.empty() ? "none" : removed)
          << "; agree " << ms(m.agreeUs) << " ms, build " << ms(m.buildUs) << " ms, confirm " << ms(m.confirmUs)
          << " ms, commit " << ms(m.commitUs) << " ms)";
      if (!m.error.empty()) out << ": " << m.error.substr(0, 300);
      out << "\n";
    }
  return out.str();
}

// A group's ranks are renumbered by each shrink: its collectives are compared within one
// membership, named "G (members since generation T)" after the shrink that made it.
std::string membershipLabel(const RankDump& d, const DumpOp& e) {
  uint64_t since = 0;
  for (const auto& m : d.memberships)
    if (m.group == e.group && m.outcome == "shrunk" && m.toGeneration <= e.generation)
      since = std::max(since, m.toGeneration);
  return since == 0 ? e.group : e.group + " (members since generation " + std::to_string(since) + ")";
}

// Size classes as the group's shadowReport() has them: the next power of two.
int64_t pow2Ceil(int64_t bytes) {
  int64_t c = 1;
  while (c < bytes && c < (int64_t{1} << 62)) c <<= 1;
  return c;
}

// "up to 4 KiB", for grouping shadow runs by size.
std::string sizeClass(int64_t bytes) {
  const int64_t c = pow2Ceil(bytes);
  return "up to " + (c >= (1 << 20) ? std::to_string(c >> 20) + " MiB"
                     : c >= 1024    ? std::to_string(c >> 10) + " KiB"
                                    : std::to_string(c) + " B");
}

// "Group G: allreduce on shm, shadow gloo, up to 8 KiB: 12/12 agree; the shadow took 1.80x the backend's time",
// one line per (group, op, backend, shadow, size class) over all ranks, then the first
// disagreement's detail. The point: decide from a dump whether a candidate backend is right.
std::string describeShadows(const std::vector<RankDump>& dumps) {
  struct Tally {
    int agree = 0, disagree = 0, failed = 0;
    double backendUs = 0, shadowUs = 0;
    const ShadowEvent* firstBad = nullptr;
  };
  std::map<std::string, std::map<int64_t, std::pair<std::string, Tally>>> tallies;
  for (const auto& d : dumps)
    for (const auto& s : d.shadows) {
      const std::string key = "Group " + s.group + ": " + s.op + " on " + s.backend + ", shadow " + s.shadow;
      auto& [label, t] = tallies[key][pow2Ceil(s.bytes)];
      label = sizeClass(s.bytes);
      (s.outcome == "agree" ? t.agree : s.outcome == "disagree" ? t.disagree : t.failed)++;
      t.backendUs += s.backendUs;
      t.shadowUs += s.shadowUs;
      if (s.outcome != "agree" && (!t.firstBad || s.seq < t.firstBad->seq)) t.firstBad = &s;
    }
  std::ostringstream out;
  for (const auto& [key, bySize] : tallies)
    for (const auto& [lo, entry] : bySize) {
      const auto& [label, t] = entry;
      const int n = t.agree + t.disagree + t.failed;
      out << key << ", " << label << ": " << t.agree << "/" << n << " agree";
      if (t.disagree) out << ", " << t.disagree << " disagree";
      if (t.failed) out << ", " << t.failed << " failed";
      if (t.backendUs > 0) {
        char ratio[32];
        std::snprintf(ratio, sizeof ratio, "%.2f", double(t.shadowUs) / double(t.backendUs));
        out << "; the shadow took " << ratio << "x the backend's time";
      }
      out << "\n";
      if (t.firstBad)
        out << "  first at seq " << t.firstBad->seq << " on rank " << t.firstBad->rank << ": "
            << t.firstBad->detail.substr(0, 300) << "\n";
    }
  return out.str();
}

// "Device times ...", then one line per (group, op, backend) over all ranks: how many ops
// its backend timed on the device, their median and the slowest (rank and seq). Empty
// when no entry has a device time (cpu backends; nccl without enable_timing).
std::string describeDeviceTimes(const std::vector<RankDump>& dumps) {
  std::map<std::string, std::vector<const DumpOp*>> timed;
  for (const auto& d : dumps)
    for (const auto& e : d.entries)
      if (e.deviceMs >= 0) timed["group " + e.group + ", " + e.op + " on " + e.backend].push_back(&e);
  if (timed.empty()) return "";
  std::ostringstream out;
  out << "Device times (device_ms: each op's time on its device, from its backend's events):\n";
  for (auto& [key, entries] : timed) {
    std::sort(entries.begin(), entries.end(),
              [](const DumpOp* a, const DumpOp* b) { return a->deviceMs < b->deviceMs; });
    const DumpOp& slowest = *entries.back();
    char text[160];
    std::snprintf(text, sizeof text, ": %zu timed, median %.3f ms, max %.3f ms (rank %d seq %llu)", entries.size(),
                  entries[(entries.size() - 1) / 2]->deviceMs, slowest.deviceMs, slowest.rank,
                  static_cast<unsigned long long>(slowest.seq));
    out << "  " << key << text << "\n";
  }
  return out.str();
}

using Timeline = std::map<int, std::map<uint64_t, const DumpOp*>>;  // group rank -> seq -> entry

std::string describeDivergence(const std::string& group, const Timeline& byRank, uint64_t seq) {
  std::vector<int> missing;
  std::map<std::string, std::vector<int>> bySignature;
  std::map<std::string, std::vector<int>> byState;
  const DumpOp* any = nullptr;
  for (const auto& [rank, entries] : byRank) {
    auto it = entries.find(seq);
    if (it == entries.end()) {
      missing.push_back(rank);
      continue;
    }
    any = it->second;
    bySignature[signature(*it->second)].push_back(rank);
    byState[it->second->state].push_back(rank);
  }
  std::ostringstream out;
  const std::string what = any ? any->op + " seq " + std::to_string(seq) : "seq " + std::to_string(seq);
  out << "Group " << group << ": the first divergence is at " << what
      << (any ? " (" + any->dtype + ", " + std::to_string(any->numel) + " elements, " + any->backend +
                    (any->generation ? ", config generation " + std::to_string(any->generation) : "") + ")"
              : "")
      << ". ";
  for (const auto& [state, ranks] : byState) {
    out << plural(ranks) << list(ranks)
        << (state == "completed" ? " completed it"
            : state == "failed"  ? " failed in it"
                                 : " started it and never completed it");
    if (state == "failed") {
      const auto& e = *byRank.at(ranks[0]).at(seq);
      if (!e.error.empty())
        out << " (rank " << ranks[0] << ": " << e.error.substr(0, 200) << (e.error.size() > 200 ? "..." : "") << ")";
    }
    out << ". ";
  }
  for (int rank : missing) {
    const auto& entries = byRank.at(rank);
    auto before = entries.lower_bound(seq);
    if (before == entries.begin()) {
      out << "Rank " << rank << " never issued it (nothing recorded before it). ";
    } else {
      const DumpOp& last = *std::prev(before)->second;
      out << "Rank " << rank << " never issued it: its last collective was " << last.op << " seq " << last.seq << " ("
          << last.state << ")"
          << (before != entries.end() ? ", and it went on to seq " + std::to_string(before->first) : "") << ". ";
    }
  }
  if (!missing.empty()) {
    out << "Look at rank" << (missing.size() > 1 ? "s " : " ") << list(missing)
        << " first: it stopped issuing collectives after its last one (blocked in application code, a crash, or "
           "a different code path), while the others waited.";
  } else if (bySignature.size() > 1) {
    out << "The ranks disagree on the call: ";
    bool first = true;
    for (const auto& [sig, ranks] : bySignature) {
      out << (first ? "" : "; ") << (ranks.size() > 1 ? "ranks " : "rank ") << list(ranks) << " issued " << sig;
      first = false;
    }
    out << ". Make every rank issue the same op with the same dtype and size here (debug.check_collectives: true "
           "catches this before anything is sent).";
  } else {
    out << "Every rank issued the same call, so the backend did not finish it: check the failed ranks' errors, "
           "the network between the ranks, or whether the op is just slower than group.timeout.";
  }
  return out.str();
}

// Dumps of a running job (`commhost trace dump`) are taken moments apart, so the ranks
// differ by the ops in flight: a rank a collective ahead is not a hang. At the first seq
// where they differ, it is skew when the dumps were asked for (allOnRequest), no rank
// failed there, the calls agree, and every rank recorded progress (an op scheduled,
// started or ended) within kRecentUs before its own dump. Returns "" otherwise, else the
// paragraph that says so.
constexpr int64_t kRecentUs = 2000000;

// Whether every dump was asked for (`commhost trace dump`, SIGUSR1, Python) rather than
// written by the supervisor for a failure (an incident, an error, a stalled watchdog), and
// none reports a lost peer: only such dumps can be a running job's skew.
bool allOnRequest(const std::vector<RankDump>& dumps) {
  for (const auto& d : dumps) {
    for (const auto& g : d.groups)
      if (!g.lostPeers.empty()) return false;
    for (const char* failure : {"incident", "error in ", "watchdog stalled"})
      if (d.reason.rfind(failure, 0) == 0) return false;
  }
  return true;
}

std::string describeSkew(const std::string& group, const Timeline& byRank, uint64_t seq,
                         const std::map<int, int64_t>& dumpTimeUs) {
  std::set<std::string> sigs;
  int64_t oldestGap = INT64_MIN;
  int oldestRank = -1;
  uint64_t lowest = UINT64_MAX, highest = 0;
  for (const auto& [rank, entries] : byRank) {
    auto it = entries.find(seq);
    if (it != entries.end()) sigs.insert(signature(*it->second));
    int64_t latest = 0;
    for (const auto& [s, e] : entries) {
      if (s >= seq && e->state == "failed") return "";  // a failure there or after: not skew
      latest = std::max({latest, e->scheduledUs, e->startedUs, e->endedUs});
    }
    const auto dumped = dumpTimeUs.find(rank);
    if (dumped == dumpTimeUs.end() || latest <= 0) return "";
    const int64_t gap = dumped->second - latest;
    if (gap > kRecentUs) return "";
    if (gap >= oldestGap) oldestGap = gap, oldestRank = rank;
    lowest = std::min(lowest, entries.rbegin()->first);
    highest = std::max(highest, entries.rbegin()->first);
  }
  if (sigs.size() > 1) return "";
  std::ostringstream out;
  out << "Group " << group << ": no problem seen. The ranks' last collectives are seq " << lowest << " to " << highest
      << ", as dumps of a running job taken moments apart differ by the ops in flight, and every rank recorded "
      << "progress within " << kRecentUs / 1000000
      << " s before its dump (the longest gap: " << std::max<int64_t>(oldestGap, 0) / 1000 << " ms, rank " << oldestRank
      << "). A hang shows as a rank whose last op is older than that: if you suspect "
      << "one, take the dumps again (commhost trace dump) and compare.";
  return out.str();
}

}  // namespace

std::string analyze(const std::vector<RankDump>& dumps) {
  std::map<std::string, Timeline> groups;
  std::map<std::string, int> sizes;
  std::map<std::string, std::map<int, int64_t>> dumpTimes;  // group -> group rank -> its dump's time
  for (const auto& d : dumps)
    for (const auto& e : d.entries) {
      if (e.pointToPoint()) continue;  // p2p seqs are per pair of ranks, not comparable
      const std::string group = membershipLabel(d, e);
      groups[group][e.rank][e.seq] = &e;
      sizes[group] = std::max(sizes[group], e.worldSize);
      dumpTimes[group][e.rank] = d.timeUs;
    }
  const bool onRequest = allOnRequest(dumps);
  std::ostringstream out;
  out << "Read " << dumps.size() << " dump" << (dumps.size() > 1 ? "s" : "") << " (ranks";
  for (const auto& d : dumps) out << " " << d.rank;
  out << "; first reason: " << (dumps.empty() ? "" : dumps[0].reason) << ").\n";
  for (const auto& d : dumps)
    for (const auto& g : d.groups)
      for (const auto& [peer, why] : g.lostPeers)
        out << "Rank " << d.rank << " reported " << g.name << ": peer " << peer << " lost: " << why << "\n";
  const std::string swaps = describeSwaps(dumps);
  if (!swaps.empty()) out << swaps;
  out << describeReroutes(dumps);
  out << describeMemberships(dumps);
  const std::string shadows = describeShadows(dumps);
  if (!shadows.empty()) out << shadows;
  out << describeDeviceTimes(dumps);
  for (const auto& [group, byRank] : groups) {
    std::vector<int> noData;
    for (int r = 0; r < sizes[group]; ++r)
      if (!byRank.count(r)) noData.push_back(r);
    uint64_t first = 0, last = 0;
    for (const auto& [rank, entries] : byRank) {
      first = std::max(first, entries.begin()->first);  // the rings may have dropped older ones
      last = std::max(last, entries.rbegin()->first);
    }
    out << "\n";
    if (!noData.empty())
      out << "Group " << group << ": no dump from " << (noData.size() > 1 ? "ranks " : "rank ") << list(noData)
          << " (dead, unreachable, or its supervisor is off); comparing the other ranks.\n";
    bool diverged = false;
    for (uint64_t seq = first; seq <= last && !diverged; ++seq) {
      bool differs = false;
      std::set<std::string> sigs;
      for (const auto& [rank, entries] : byRank) {
        auto it = entries.find(seq);
        if (it == entries.end() || it->second->state != "completed") differs = true;
        else sigs.insert(signature(*it->second));
      }
      if (differs || sigs.size() > 1) {
        const std::string skew = noData.empty() && onRequest ? describeSkew(group, byRank, seq, dumpTimes[group]) : "";
        out << (skew.empty() ? describeDivergence(group, byRank, seq) : skew) << "\n";
        diverged = true;
      }
    }
    if (!diverged)
      out << "Group " << group << ": all " << byRank.size() << " ranks recorded seq " << first << " to " << last
          << " identically and completed them; no divergence in the recorded window.\n";
  }
  return out.str();
}

}  // namespace commhost::cli::trace
