// SPDX-License-Identifier: Apache-2.0
#include "status.h"

#include <unistd.h>

#include <algorithm>
#include <set>

#include "../store/counting_store.h"
#include "commhost/errors.h"
#include "supervisor.h"

namespace commhost::supervisor {
namespace {

std::string hostName() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return host;
}

double seconds(SteadyClock::duration d) { return std::chrono::duration<double>(d).count(); }

std::vector<OpStat> opStats(const OpStats& stats) {
  std::vector<OpStat> out;
  out.reserve(stats.cells().size());
  for (const auto& [k, c] : stats.cells())
    out.push_back({k.group, opName(k.op), k.backend, sizeClassName(k.sizeClass), c.completed, c.failed, c.bytes,
                   c.timed, c.latencySumUs, std::vector<uint64_t>(c.buckets.begin(), c.buckets.end())});
  return out;
}

}  // namespace

void StatusPublisher::tick(TimePoint now, const std::vector<std::shared_ptr<GroupMonitor>>& groups) {
  ops_.poll(sup_.recorder());
  notePeerLosses(groups);
  if (now < nextPublish_) return;
  nextPublish_ = now + sup_.settings().heartbeatInterval;
  // The first group with a job store that still answers carries the record.
  GroupMonitor* carrier = nullptr;
  for (const auto& g : groups)
    if (g->jobStore && !g->storeLost.load(std::memory_order_acquire)) {
      carrier = g.get();
      break;
    }
  if (!carrier) return;
  const auto start = SteadyClock::now();
  ProcessStatus status = build(now, groups);
  status.publishCostUs = lastCostUs_;
  Store& store = *carrier->jobStore;
  if (!worldPublished_) {
    // The job's world: the size of the group whose ranks are the job's (the largest).
    int world = 0;
    for (const auto& g : groups)
      for (int r : g->globalRanks) world = std::max(world, r + 1);
    // The largest any rank saw wins, whatever the order of their writes.
    const Bytes want = toBytes(std::to_string(world));
    Bytes expected;
    for (;;) {
      const Bytes stored = store.compareSet(kStatusWorldKey, expected, want);
      if (stored == want || counterValue(kStatusWorldKey, stored) >= world) break;
      expected = stored;
    }
    worldPublished_ = true;
  }
  store.set(statusKey(status.rank), toBytes(encodeStatus(status)));
  lastCostUs_ = std::chrono::duration<double, std::micro>(SteadyClock::now() - start).count();
}

ProcessStatus StatusPublisher::build(TimePoint now, const std::vector<std::shared_ptr<GroupMonitor>>& groups) {
  ProcessStatus p;
  p.rank = groups.empty() ? 0 : groups.front()->globalRank(groups.front()->rank);
  p.host = hostName();
  p.pid = static_cast<int>(::getpid());
  p.publishedUnixMs = wallMicros() / 1000;
  p.intervalMs = sup_.settings().heartbeatInterval.count();
  const auto running = sup_.running();  // one copy of the list for every group
  for (const auto& g : groups) p.groups.push_back(groupStatus(*g, now, running));
  for (const Event& e : sup_.events().events()) p.events.push_back({e.id, e.unixMs, e.kind, e.group, e.text});
  p.eventCounts = sup_.events().counts();
  const OpStats& stats = ops_.stats();
  p.ops = opStats(stats);
  p.latencyBucketsUs.assign(kLatencyBucketsUs.begin(), kLatencyBucketsUs.end());
  p.opsMissed = stats.missed() + stats.overflow();
  p.shadows = sup_.shadowTallies();
  // The groups of one job share its store's counts: each counted once.
  std::set<const StoreCounts*> seen;
  for (const auto& g : groups)
    if (g->storeCounts && seen.insert(g->storeCounts.get()).second) {
      for (const auto& [op, n] : g->storeCounts->snapshot(false)) p.storeRequests[op] += n;
      for (const auto& [op, n] : g->storeCounts->snapshot(true)) p.storeFailures[op] += n;
    }
  return p;
}

GroupStatus StatusPublisher::groupStatus(GroupMonitor& g, TimePoint now,
                                         const std::vector<std::shared_ptr<SupervisedWork>>& running) {
  GroupStatus s;
  s.name = g.name;
  s.rank = g.rank;
  s.worldSize = g.worldSize;
  s.globalRanks = g.globalRanks;
  const GroupMonitor::Info info = g.infoSnapshot();
  s.generation = info.generation;
  s.configHash = info.configHash;
  s.configSource = info.configSource;
  s.backends = info.backends;
  s.routes = info.routes;
  const GroupMonitor::IssuedOp issued = g.newestCollective();
  s.lastIssuedSeq = issued.seq;
  s.lastIssuedOp = issued.seq ? opName(issued.op) : "none";
  s.lastCompletedSeq = g.lastCompleted.load(std::memory_order_relaxed);
  const GroupOpNow in = groupOpNow(g, running);
  s.inFlight = in.inFlight;
  if (in.oldest)
    s.oldest = OpInFlight{opName(in.oldest->context().op), in.oldest->context().seq, in.oldest->backend,
                          seconds(now - in.oldest->issued())};
  // An op a backend runs inline waits inside the call, before any work exists: its age
  // counts from the first poll that saw it there.
  const GroupMonitor::IssuedOp inCall = in.inCall;
  auto& since = inCallSince_[&g];
  if (inCall.seq == 0) {
    since = {0, now};
  } else {
    if (since.first != inCall.seq) since = {inCall.seq, now};
    if (!s.oldest) {
      s.inFlight = 1;
      s.oldest = OpInFlight{opName(inCall.op), inCall.seq, "", seconds(now - since.second)};
    }
  }
  const GroupMonitor::HeartbeatView& h = g.heartbeat;  // this thread's own view
  for (size_t i = 0; i < h.watched.size(); ++i) s.heartbeatAge[h.watched[i]] = seconds(now - h.watchedSince[i]);
  s.lostPeers = g.lost();
  const std::set<int> left = g.left();
  s.leftPeers.assign(left.begin(), left.end());
  return s;
}

void StatusPublisher::notePeerLosses(const std::vector<std::shared_ptr<GroupMonitor>>& groups) {
  std::map<const GroupMonitor*, std::set<int>> seen;
  std::map<const GroupMonitor*, std::pair<uint64_t, TimePoint>> inCall;
  for (const auto& g : groups) {
    std::set<int>& mine = seen[g.get()];
    if (auto it = lostSeen_.find(g.get()); it != lostSeen_.end()) mine = std::move(it->second);
    if (auto it = inCallSince_.find(g.get()); it != inCallSince_.end()) inCall.insert(*it);
    if (!g->anyPeerLost.load(std::memory_order_acquire)) continue;
    for (const auto& [peer, why] : g->lost()) {
      if (!mine.insert(peer).second) continue;
      const std::string who = peer < 0 ? "the store" : "peer " + std::to_string(g->globalRank(peer));
      sup_.events().add("peer_lost", g->name, ErrorContext{g->name, g->rank}.format() + who + " lost: " + why);
    }
  }
  lostSeen_.swap(seen);  // groups that are gone leave both maps
  inCallSince_.swap(inCall);
}

}  // namespace commhost::supervisor
