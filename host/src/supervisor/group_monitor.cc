// SPDX-License-Identifier: Apache-2.0
#include "group_monitor.h"

#include "flight_recorder.h"

namespace commhost::supervisor {

void GroupMonitor::markLost(int peer, const std::string& why) {
  {
    MutexLock lock(&lostMutex);
    if (!lostPeers.emplace(peer, why).second) return;
  }
  anyPeerLost.store(true, std::memory_order_release);
}

void GroupMonitor::markLeft(int peer) {
  MutexLock lock(&lostMutex);
  leftPeers.insert(peer);
  anyPeerLeft.store(true, std::memory_order_release);
}

bool GroupMonitor::isLost(int peer) {
  MutexLock lock(&lostMutex);
  return lostPeers.count(peer) != 0;
}

std::map<int, std::string> GroupMonitor::lost() {
  MutexLock lock(&lostMutex);
  return lostPeers;
}

std::set<int> GroupMonitor::left() {
  MutexLock lock(&lostMutex);
  return leftPeers;
}

std::string GroupMonitor::lostText() {
  MutexLock lock(&lostMutex);
  std::string lost;
  for (const auto& [peer, why] : lostPeers)
    lost += (lost.empty() ? "" : "; ") +
            (peer >= 0 ? "peer " + std::to_string(globalRank(peer)) + " lost: " : std::string()) + why;
  for (int peer : leftPeers)
    lost += (lost.empty() ? "" : "; ") + std::string("peer ") + std::to_string(globalRank(peer)) +
            " left: it destroyed its side of the group";
  return lost;
}

const RecordNames* cachedRecordNames(FlightRecorder& recorder, GroupMonitor& group, const std::string& backend) {
  for (const auto& cached : group.recordNames) {
    const RecordNames* n = cached.load(std::memory_order_acquire);
    if (n && n->isFor(backend)) return n;
  }
  // The recorder holds kMaxNames: this group records into the ring from now on, without
  // asking again (under the recorder's lock, on every op).
  if (group.recordNamesFull.load(std::memory_order_relaxed)) return nullptr;
  const RecordNames* n = recorder.intern(group.name, backend, group.rank, group.worldSize);
  if (!n) {
    group.recordNamesFull.store(true, std::memory_order_relaxed);
    return nullptr;
  }
  group.recordNames[group.nextRecordName.fetch_add(1, std::memory_order_relaxed) % group.recordNames.size()].store(
      n, std::memory_order_release);
  return n;
}

}  // namespace commhost::supervisor
