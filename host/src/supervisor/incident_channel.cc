// SPDX-License-Identifier: Apache-2.0
#include "incident_channel.h"

#include <cstdlib>

#include "commhost/errors.h"
#include "group_monitor.h"
#include "messages.h"

namespace commhost::supervisor {

std::string ackKey(int rank, int64_t incident) {
  return "supervisor/ack/" + std::to_string(rank) + "/" + std::to_string(incident);
}

bool appendToIncidentLog(GroupMonitor& g, const std::vector<std::string>& lines) {
  if (lines.empty()) return true;
  const auto n = static_cast<int64_t>(lines.size());
  if (g.store->add(kIncidentCount, 0) + n > kMaxIncidentLines) return false;
  for (const auto& line : lines) g.store->append(kIncidentLog, toBytes(line));
  g.store->add(kIncidentCount, n);
  return true;
}

std::set<int> peersThatDumped(GroupMonitor& g, int64_t incident, int64_t raisedAtMs, int64_t windowMs) {
  // Lines that do not decode are skipped here; IncidentChannel::answer logs them.
  std::set<int> out;
  for (const auto& line : wire::splitLines(toString(g.store->get(ackKey(g.rank, incident)))))
    if (auto ack = wire::decodeAck(line); ack && ack.value < g.worldSize) out.insert(ack.value);
  for (const auto& line : wire::splitLines(toString(g.store->get(kIncidentLog)))) {
    const auto decoded = wire::decodeLogLine(line);
    if (!decoded || decoded.value.kind != wire::LogLine::Kind::Incident) continue;
    const wire::Incident& m = decoded.value.incident;
    if (m.rank != g.rank && m.rank < g.worldSize && std::llabs(m.raisedAtMs - raisedAtMs) <= windowMs)
      out.insert(m.rank);
  }
  return out;
}

void IncidentChannel::answer(GroupMonitor& g, Logger& logger, const std::function<void()>& beforeAck) {
  MutexLock lock(&mu_);
  const int64_t count = g.store->add(kIncidentCount, 0);
  if (count <= seen_) return;
  const auto lines = wire::splitLines(toString(g.store->get(kIncidentLog)));
  std::vector<std::string> acks;
  for (int64_t n = seen_ + 1; n <= static_cast<int64_t>(lines.size()); ++n) {
    seen_ = n;
    const auto decoded = wire::decodeLogLine(lines[n - 1]);
    if (!decoded) {
      logger.warn(ErrorContext{g.name, g.rank}.format() + "skipped line " + std::to_string(n) +
                  " of the incident log: " + decoded.error +
                  ". Next: run every rank with the same commhost "
                  "version; if they do, the store's data is damaged");
      continue;
    }
    if (decoded.value.kind == wire::LogLine::Kind::PeerLost) {
      const wire::PeerLost& m = decoded.value.peerLost;
      if (m.rank != g.rank && m.peer != g.rank && m.peer < g.worldSize) g.markLost(m.peer, m.why);
      continue;
    }
    const wire::Incident& m = decoded.value.incident;
    if (m.rank != g.rank && m.rank < g.worldSize) acks.push_back(ackKey(m.rank, m.number));
  }
  if (acks.empty()) return;
  beforeAck();
  for (const auto& key : acks) g.store->append(key, toBytes(wire::encodeAck(g.rank)));
}

}  // namespace commhost::supervisor
