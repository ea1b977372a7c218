// SPDX-License-Identifier: Apache-2.0
#include "status_view.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <set>
#include <sstream>

namespace commhost::cli {
namespace {

struct Member {
  int rank;  // the job's (global) rank
  const ProcessStatus* process;
  const GroupStatus* group;
};

std::string secondsText(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, s < 10 ? "%.1f s" : "%.0f s", s);
  return buf;
}

std::string rankListText(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i)
    out += (i == 0 ? "" : i + 1 == ranks.size() ? " and " : ", ") + std::to_string(ranks[i]);
  return out;
}

// Each group's members across the processes, by group name, in rank order.
std::map<std::string, std::vector<Member>> membersByGroup(const std::vector<ProcessStatus>& ranks) {
  std::map<std::string, std::vector<Member>> out;
  for (const auto& p : ranks)
    for (const auto& g : p.groups) out[g.name].push_back({p.rank, &p, &g});
  return out;
}

double silentSeconds(const ProcessStatus& p, const ViewOptions& o) {
  return static_cast<double>(o.nowUnixMs - p.publishedUnixMs) / 1000.0;
}

bool isSilent(const ProcessStatus& p, const ViewOptions& o) {
  const double allowed = std::max(3.0 * static_cast<double>(p.intervalMs), static_cast<double>(p.intervalMs) + 2000) /
                         1000.0;
  return silentSeconds(p, o) > allowed;
}

// "rank 2 behind by 1 op in allreduce seq 50 for 12 s (ranks 0, 1 and 3 wait)", one per
// rank behind, when the ranks ahead have waited at least behindAfterSeconds.
void behindProblems(const std::string& name, const std::vector<Member>& members, const ViewOptions& o, bool nameGroup,
                    std::vector<Problem>& problems) {
  uint64_t maxIssued = 0;
  for (const auto& m : members) maxIssued = std::max(maxIssued, m.group->lastIssuedSeq);
  std::vector<int> waiting;
  double waited = 0;
  std::string op;
  for (const auto& m : members) {
    if (m.group->lastIssuedSeq != maxIssued || !m.group->oldest) continue;
    waiting.push_back(m.rank);
    waited = std::max(waited, m.group->oldest->seconds);
    op = m.group->lastIssuedOp;
  }
  if (waiting.empty() || waited < o.behindAfterSeconds) return;
  for (const auto& m : members) {
    const uint64_t behind = maxIssued - m.group->lastIssuedSeq;
    if (behind == 0) continue;
    problems.push_back({m.rank, "behind",
                        "rank " + std::to_string(m.rank) + " behind by " + std::to_string(behind) +
                            (behind == 1 ? " op" : " ops") + " in " + op + " seq " + std::to_string(maxIssued) +
                            " for " + secondsText(waited) + (nameGroup ? " in group " + name : "") + " (" +
                            rankListText(waiting) + " wait; it last issued " + m.group->lastIssuedOp + " seq " +
                            std::to_string(m.group->lastIssuedSeq) + ")"});
  }
}

void lostProblems(const std::vector<Member>& members, std::vector<Problem>& problems) {
  std::set<int> said;
  for (const auto& m : members)
    for (const auto& [peer, why] : m.group->lostPeers) {
      const int global = peer >= 0 && peer < static_cast<int>(m.group->globalRanks.size()) ? m.group->globalRanks[peer]
                                                                                           : peer;
      if (!said.insert(global).second) continue;
      problems.push_back({peer < 0 ? -1 : global, "lost",
                          (peer < 0 ? std::string("the store") : "rank " + std::to_string(global)) +
                              " lost (said by rank " + std::to_string(m.rank) + ": " + why + ")"});
    }
}

}  // namespace

std::vector<Problem> problems(const std::vector<ProcessStatus>& ranks, const ViewOptions& o) {
  std::vector<Problem> problems;
  std::set<int> present;
  for (const auto& p : ranks) present.insert(p.rank);
  for (int r = 0; r < o.expectedRanks; ++r)
    if (!present.count(r)) problems.push_back({r, "missing", "rank " + std::to_string(r) + " has published no status"});
  for (const auto& p : ranks)
    if (isSilent(p, o))
      problems.push_back({p.rank, "silent",
                          "rank " + std::to_string(p.rank) + " silent for " + secondsText(silentSeconds(p, o)) + " (" +
                              p.host + " pid " + std::to_string(p.pid) + ")"});
  const auto groups = membersByGroup(ranks);
  for (const auto& [name, members] : groups) {
    behindProblems(name, members, o, groups.size() > 1, problems);
    lostProblems(members, problems);
  }
  return problems;
}

std::string summaryLine(const std::vector<ProcessStatus>& ranks, const ViewOptions& o) {
  const std::vector<Problem> problems = cli::problems(ranks, o);
  if (!problems.empty()) {
    std::string out;
    for (const auto& p : problems) out += (out.empty() ? "" : "; ") + p.text;
    return out;
  }
  std::string out = std::to_string(ranks.size()) + (ranks.size() == 1 ? " rank ok" : " ranks ok");
  if (ranks.empty()) return "no rank has published a status";
  const GroupStatus* first = ranks.front().groups.empty() ? nullptr : &ranks.front().groups.front();
  if (first)
    out += " (group " + first->name + " generation " + std::to_string(first->generation) + ", " +
           (first->lastIssuedSeq ? first->lastIssuedOp + " seq " + std::to_string(first->lastIssuedSeq)
                                 : std::string("no collective yet")) +
           ")";
  return out;
}

std::string details(const std::vector<ProcessStatus>& ranks, const ViewOptions& o) {
  std::ostringstream out;
  for (const auto& [name, members] : membersByGroup(ranks)) {
    const GroupStatus& g = *members.front().group;
    out << "group " << name << ": " << g.worldSize << " ranks, generation " << g.generation << ", config "
        << g.configSource << " (hash " << g.configHash << ")\n";
    out << "  backends: ";
    for (size_t i = 0; i < g.backends.size(); ++i) out << (i ? ", " : "") << g.backends[i];
    out << "\n  routes:\n";
    for (const auto& line : g.routes) out << "    " << line << "\n";
    char head[200];
    std::snprintf(head, sizeof head, "  %-5s %-20s %-8s %-24s %-9s %-5s %-32s %-18s %s\n", "rank", "host", "pid",
                  "last issued", "completed", "gen", "oldest in flight", "peer beat age", "status age");
    out << head;
    for (const auto& m : members) {
      const GroupStatus& s = *m.group;
      std::string oldest = "-";
      if (s.oldest)
        oldest = s.oldest->op + " " + std::to_string(s.oldest->seq) +
                 (s.oldest->backend.empty() ? "" : " " + s.oldest->backend) + " " + secondsText(s.oldest->seconds) +
                 (s.inFlight > 1 ? " (+" + std::to_string(s.inFlight - 1) + ")" : "");
      std::string beats;
      for (const auto& [peer, age] : s.heartbeatAge)
        beats += (beats.empty() ? "" : " ") + std::to_string(peer) + ":" + secondsText(age);
      char line[400];
      std::snprintf(
          line, sizeof line, "  %-5d %-20s %-8d %-24s %-9llu %-5llu %-32s %-18s %s\n", m.rank, m.process->host.c_str(),
          m.process->pid, (s.lastIssuedOp + " " + std::to_string(s.lastIssuedSeq)).c_str(),
          static_cast<unsigned long long>(s.lastCompletedSeq), static_cast<unsigned long long>(s.generation),
          oldest.c_str(), beats.empty() ? "-" : beats.c_str(), secondsText(silentSeconds(*m.process, o)).c_str());
      out << line;
    }
  }
  for (const auto& p : ranks)
    for (const auto& t : p.shadows)
      out << "shadow rank " << p.rank << " " << t.group << " " << t.op << ": " << t.shadow << " beside " << t.backend
          << ": " << t.agree << " agreed, " << t.disagree << " disagreed, " << t.failed << " failed\n";
  return out.str();
}

std::vector<std::string> newEvents(const std::vector<ProcessStatus>& ranks, std::map<std::string, uint64_t>& seen) {
  std::vector<std::pair<int64_t, std::string>> out;
  for (const auto& p : ranks) {
    uint64_t& last = seen[p.host + ":" + std::to_string(p.pid)];
    for (const auto& e : p.events) {
      if (e.id <= last) continue;
      const std::time_t t = static_cast<std::time_t>(e.unixMs / 1000);
      std::tm tm{};
      ::localtime_r(&t, &tm);
      char when[16];
      std::strftime(when, sizeof when, "%H:%M:%S", &tm);
      out.emplace_back(e.unixMs, std::string(when) + " rank " + std::to_string(p.rank) + " " + e.kind + ": " + e.text);
    }
    if (!p.events.empty()) last = std::max(last, p.events.back().id);
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> lines;
  for (auto& [when, text] : out) lines.push_back(std::move(text));
  return lines;
}

}  // namespace commhost::cli
