// SPDX-License-Identifier: Apache-2.0
#include "desync.h"

#include <cstdlib>
#include <map>
#include <thread>

#include "../core/rank_name.h"
#include "commhost/errors.h"
#include "commhost/sdk/option_schema.h"
#include "messages.h"

namespace commhost::supervisor {
namespace {

struct Progress {
  bool known = false;
  uint64_t issued = 0;
  std::string issuedOp;
  uint64_t completed = 0;
};

// A rank whose progress does not decode (another commhost version) counts as unknown.
Progress readProgressOf(GroupMonitor& g, int rank) {
  const std::string key = progressKey(rank);
  if (!g.store->check({key})) return {};
  const auto decoded = wire::decodeProgress(toString(g.store->get(key)));
  if (!decoded) return {};
  return {true, decoded.value.issued, decoded.value.issuedOp, decoded.value.completed};
}

std::vector<Progress> readProgress(GroupMonitor& g) {
  std::vector<Progress> out(g.worldSize);
  for (int r = 0; r < g.worldSize; ++r) out[r] = readProgressOf(g, r);
  return out;
}

}  // namespace

std::string progressKey(int rank) { return "supervisor/progress/" + std::to_string(rank); }
std::string heartbeatKey(int rank) { return "supervisor/heartbeat/" + std::to_string(rank); }
std::string leftKey(int rank) { return "supervisor/left/" + std::to_string(rank); }
void publishProgress(GroupMonitor& g) {
  const GroupMonitor::IssuedOp issued = g.newestCollective();
  const char* op = issued.seq ? opName(issued.op) : "none";
  g.store->set(progressKey(g.rank),
               toBytes(wire::encode(wire::Progress{issued.seq, op, g.lastCompleted.load(std::memory_order_relaxed)})));
}

std::string rankList(const GroupMonitor& g, const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i) out += i + 1 == ranks.size() ? " and " : ", ";
    out += rankName(ranks[i], g.globalRanks);
  }
  return out;
}

std::string desyncReport(GroupMonitor& g, uint64_t seq, OpType op) {
  const auto progress = readProgress(g);
  const std::string what = std::string(opName(op)) + " seq " + std::to_string(seq);
  std::vector<int> waiting, unknown;
  std::map<std::string, std::vector<int>> behind;  // where each rank is instead
  for (int r = 0; r < g.worldSize; ++r) {
    const Progress& p = progress[r];
    if (!p.known) {
      unknown.push_back(r);
    } else if (p.issued < seq) {
      std::string where = p.issued == 0 ? "has issued no collective yet"
                                        : "last reported " + p.issuedOp + " seq " + std::to_string(p.issued) +
                                              (p.completed >= p.issued ? " (completed)" : " (not completed)");
      behind[where].push_back(r);
    } else if (p.completed < seq) {
      waiting.push_back(r);
    }
  }
  std::string out;
  for (const auto& [where, ranks] : behind)
    out += (ranks.size() > 1 ? "Ranks " : "Rank ") + rankList(g, ranks) + " never joined " + what + ": " +
           (ranks.size() > 1 ? "they " : "it ") + where + ". ";
  if (!waiting.empty())
    out += (waiting.size() > 1 ? "Ranks " : "Rank ") + rankList(g, waiting) + (waiting.size() > 1 ? " are" : " is") +
           " waiting in it. ";
  if (!unknown.empty())
    out += (unknown.size() > 1 ? "Ranks " : "Rank ") + rankList(g, unknown) +
           " published no progress (not started, or its supervisor is off). ";
  if (behind.empty() && unknown.empty())
    out += "Every rank issued " + what +
           "; none is missing, so the backend itself is stuck or too slow "
           "(compare the flight recorder dumps: op and sizes per rank). ";
  return out;
}

std::set<int> ranksBehind(GroupMonitor& g, uint64_t seq, const std::set<int>& among) {
  // Only the ranks asked about: this is polled every 20 ms while a report waits.
  std::set<int> out;
  for (int r : among) {
    if (r < 0 || r >= g.worldSize) continue;
    const Progress p = readProgressOf(g, r);
    if (p.known && p.issued < seq) out.insert(r);
  }
  return out;
}

void awaitLateProgress(GroupMonitor& g, uint64_t seq, std::set<int> silent, std::chrono::milliseconds patience,
                       const std::function<std::set<int>()>& heard) {
  const auto until = std::chrono::steady_clock::now() + patience;
  for (;;) {
    silent = ranksBehind(g, seq, silent);
    if (silent.empty() || std::chrono::steady_clock::now() >= until) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (int r : heard()) silent.erase(r);
  }
}

void checkFingerprints(GroupMonitor& g, uint64_t seq, OpType op, const std::string& fingerprint,
                       std::chrono::milliseconds timeout) {
  const std::string prefix = "supervisor/fingerprint/" + std::to_string(seq) + "/";
  std::vector<std::string> keys;
  for (int r = 0; r < g.worldSize; ++r) keys.push_back(prefix + std::to_string(r));
  g.store->set(keys[g.rank], toBytes(fingerprint));
  const ErrorContext where{g.name, g.rank, opName(op), seq};
  try {
    g.store->wait(keys, timeout);
  } catch (const TimeoutError&) {
    std::vector<int> missing;
    for (int r = 0; r < g.worldSize; ++r)
      if (!g.store->check({keys[r]})) missing.push_back(r);
    raise(ErrorCode::Timeout, where,
          "debug.check_collectives: rank(s) " + rankList(g, missing) + " did not reach collective seq " +
              std::to_string(seq) + " within " + formatDuration(timeout),
          "check those ranks' logs: they failed, hung, or issue fewer collectives than this rank");
  }
  const auto values = g.store->multiGet(keys);
  // Everyone has published `seq`, so everyone is past reading `seq - 1`.
  if (seq > 1) g.store->deleteKey("supervisor/fingerprint/" + std::to_string(seq - 1) + "/" + std::to_string(g.rank));
  std::map<std::string, std::vector<int>> byCall;
  for (int r = 0; r < g.worldSize; ++r) byCall[toString(values[r])].push_back(r);
  if (byCall.size() == 1) return;
  std::string diff;
  for (const auto& [call, ranks] : byCall)
    diff += std::string(diff.empty() ? "" : "; ") + (ranks.size() > 1 ? "ranks " : "rank ") + rankList(g, ranks) +
            " called " + call;
  raise(ErrorCode::InvalidArgument, where,
        "debug.check_collectives: ranks disagree on collective seq " + std::to_string(seq) + ": " + diff,
        "make every rank issue the same op with the same dtype, shapes, root and reduce op at this point; "
        "nothing was sent");
}

}  // namespace commhost::supervisor
