// SPDX-License-Identifier: Apache-2.0
// One group as the supervisor sees it. Owned by its ProcessGroup, shared with the
// supervisor's threads (and with works still held by the application) while they use it.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "clock.h"
#include "commhost/mutex.h"
#include "commhost/store.h"
#include "commhost/types.h"
#include "incident_channel.h"
#include "record_names_memo.h"

namespace commhost {
struct StoreCounts;  // ../store/counting_store.h
}

namespace commhost::supervisor {

enum class OnError { Abort, Teardown, Report };
struct RecordNames;  // thread_lanes.h
class FlightRecorder;

struct GroupMonitor {
  // Set before the monitor is shared and never changed (a new membership is a new group,
  // with a monitor of its own): the flight recorder's interned names rely on it.
  std::string name;
  int rank = 0;
  int worldSize = 1;
  std::vector<int> globalRanks;
  StorePtr store;     // the group's store ("<name>/<generation>/")
  StorePtr jobStore;  // the job's store (trace dump requests)
  // The calls this process made to the job's store (shared by its groups; null when the
  // job's store was not wrapped, as in tests that make a monitor by hand).
  std::shared_ptr<const StoreCounts> storeCounts;
  OnError onError = OnError::Abort;
  // supervisor.on_peer_loss: shrink. A lost peer aborts the group whatever onError says
  // (never teardown or report): the survivors' works fail and ProcessGroup::shrink()
  // builds the group anew without the peer.
  bool shrinkOnPeerLoss = false;
  std::function<void(const std::string&)> abortGroup;  // set once by the group, before it is shared

  // Progress of collectives (not p2p), written by the caller thread and the watchdog.
  std::atomic<uint64_t> lastIssued{0};
  std::atomic<uint8_t> lastIssuedOp{0};
  std::atomic<uint64_t> lastCompleted{0};

  // The supervisor's recorder's interned names of this group's last few backends
  // (cachedRecordNames below): the per-op path finds its record's names here with one
  // compare of the backend's name. Any thread; an entry, once set, points at names that
  // live as long as the supervisor.
  std::array<std::atomic<const RecordNames*>, 4> recordNames{};
  std::atomic<uint8_t> nextRecordName{0};
  std::atomic<bool> recordNamesFull{false};  // the recorder refused more names (kMaxNames)
  // The issuing thread's: the heartbeat's clock reading (recentWallMicros) when this group
  // last timed an op because none was timed since that reading (Supervisor::timesOp).
  std::atomic<int64_t> lastTimedTick{-1};

  // Caller thread: the seq and op of the call now inside a backend (0: none). A backend
  // that runs an op inline (self; shm when idle) waits for peers inside that call, before
  // any Work exists for the watchdog to fail: a lost peer fails it through abort().
  std::atomic<uint64_t> inBackendCall{0};
  std::atomic<uint8_t> inBackendCallOp{0};

  // Set by the heartbeat thread (and the watchdog, on a backend's own evidence), read by
  // the watchdog: peers found lost and why.
  Mutex lostMutex;
  std::map<int, std::string> lostPeers GUARDED_BY(lostMutex);
  std::set<int> leftPeers GUARDED_BY(lostMutex);  // destroyed their group (a clean exit): silent, not lost
  std::atomic<bool> anyPeerLost{false};
  // The backend call the watchdog aborted because a peer was lost, and the verdict
  // track() gives its work.
  uint64_t abortedCallSeq GUARDED_BY(lostMutex) = 0;
  std::string abortedCallVerdict GUARDED_BY(lostMutex);
  std::atomic<bool> anyPeerLeft{false};
  // Once a store call failed, nothing calls the store again: the client would retry
  // connecting until its timeout, stalling the supervisor's threads.
  std::atomic<bool> storeLost{false};
  std::atomic<bool> incidentLogFull{false};  // set once the incident log refused a line (logged once)

  // The incident log: read by the heartbeat, and by the watchdog while it waits for acks
  // to an incident of its own.
  IncidentChannel incidents;

  // Heartbeat thread only (not shared: no lock).
  struct HeartbeatView {
    std::vector<int> watched;
    std::vector<int64_t> watchedBeat;
    std::vector<TimePoint> watchedSince;
    std::vector<bool> watchedLeft;  // the peer destroyed its group (leftKey): not lost
    TimePoint nextBeat{};
  } heartbeat;

  // Watchdog thread only (not shared: no lock).
  struct WatchdogView {
    uint64_t callSeenInBackend = 0;  // inBackendCall at the previous poll
    int64_t incidentsRaised = 0;
    std::string lastIncident;  // the desync report and where the dumps are
    TimePoint lastIncidentAt{};
  } watchdog;

  // What `commhost status` shows of the committed generation: set by the group's caller
  // thread at creation and at each swap's commit, read by the heartbeat thread.
  struct Info {
    uint64_t generation = 0;
    std::string configHash, configSource;
    std::vector<std::string> backends;  // "name" or "name (unavailable: why)"
    std::vector<std::string> routes;    // RouteTable::describe()'s lines
  };
  Mutex infoMutex;
  Info info GUARDED_BY(infoMutex);
  void setInfo(Info i) EXCLUDES(infoMutex) {
    MutexLock lock(&infoMutex);
    info = std::move(i);
  }
  Info infoSnapshot() EXCLUDES(infoMutex) {
    MutexLock lock(&infoMutex);
    return info;
  }

  // One op as the caller thread published it (seq 0: none).
  struct IssuedOp {
    uint64_t seq = 0;
    OpType op{};
  };
  // The call now inside a backend.
  IssuedOp callInBackend() const {
    const uint64_t seq = inBackendCall.load(std::memory_order_acquire);
    return {seq, static_cast<OpType>(inBackendCallOp.load(std::memory_order_relaxed))};
  }
  // The newest collective this rank has issued. A call still inside its backend counts:
  // track() records an op only once the backend call returns, and a rank waiting inside an
  // inline op (its peers not there yet) has joined that op. The published progress, the
  // status record and the dump say this, so that a desync report never calls a waiting
  // rank behind.
  IssuedOp newestCollective() const {
    IssuedOp issued{lastIssued.load(std::memory_order_relaxed),
                    static_cast<OpType>(lastIssuedOp.load(std::memory_order_relaxed))};
    const IssuedOp call = callInBackend();
    if (call.seq > issued.seq && !isPointToPoint(call.op)) return call;
    return issued;
  }

  int globalRank(int r) const { return r >= 0 && r < static_cast<int>(globalRanks.size()) ? globalRanks[r] : r; }
  void markLost(int peer, const std::string& why) EXCLUDES(lostMutex);
  void markLeft(int peer) EXCLUDES(lostMutex);
  bool isLost(int peer) EXCLUDES(lostMutex);
  // "peer N lost: why; peer M left: ..." for every peer lost or left.
  std::string lostText() EXCLUDES(lostMutex);
  // The lost peers (-1: the store) and those that left.
  std::map<int, std::string> lost() EXCLUDES(lostMutex);
  std::set<int> left() EXCLUDES(lostMutex);
};

// The recorder's interned names of `group` and `backend` for the per-op path (a lane
// record points at them): the group's cache of its last 4 backends (a name compare),
// else interned and cached. Null once the recorder holds ThreadLanes::kMaxNames: the
// group's ops then go to the shared ring, and it asks no more (the recorder's lock).
const RecordNames* cachedRecordNames(FlightRecorder& recorder, GroupMonitor& group, const std::string& backend);
// Whether an op of `group` is its first since the heartbeat thread's clock reading `tick`
// (recentWallMicros()); if so it is, from now on (Supervisor::timesOp times it). The
// group's issuing thread's.
inline bool firstSinceTick(GroupMonitor& group, int64_t tick) {
  if (group.lastTimedTick.load(std::memory_order_relaxed) == tick) return false;
  group.lastTimedTick.store(tick, std::memory_order_relaxed);
  return true;
}

// The same through `memo` first (the caller's for this group and backend, or null): one
// load, set from the group's cache when empty.
inline const RecordNames* recordNamesOf(FlightRecorder& recorder, GroupMonitor& group, const std::string& backend,
                                        const RecordNamesMemo* memo) {
  if (const RecordNames* n = memo ? memo->get() : nullptr) return n;
  const RecordNames* n = cachedRecordNames(recorder, group, backend);
  if (memo && n) memo->set(n);
  return n;
}

}  // namespace commhost::supervisor
