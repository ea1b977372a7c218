// Internal: the process-wide Supervisor (watchdog, heartbeat and hook threads, flight
// recorder) and what each group registers with it.
//
// Threads and the state each owns:
// - callers of ProcessGroup ops: track() (records + in-flight list, under mutex_);
// - watchdog thread (watchdog.cc): the only one that completes in-flight entries, runs
//   incidents (timeouts, lost peers), writes desync reports and applies on_error;
// - heartbeat thread (heartbeat.cc): publishes heartbeats and progress, watches peers,
//   answers dump requests (incidents, `commhost trace dump`, SIGUSR1), checks that the
//   watchdog advances;
// - hook thread: runs completion hooks from hookQueue_.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "commhost/config.h"
#include "commhost/errors.h"
#include "commhost/logging.h"
#include "commhost/store.h"
#include "commhost/supervisor.h"
#include "commhost/work.h"
#include "flight_recorder.h"
#include <nlohmann/json.hpp>

namespace commhost::supervisor {

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

enum class OnError { Abort, Teardown, Report };

struct Settings {
  bool enabled = true;
  OnError onError = OnError::Abort;
  Millis poll{100};
  Millis heartbeatInterval{1000};
  Millis heartbeatTimeout{10000};
  size_t entries = 2048;
  std::string dumpDir;  // the config resolves an empty dump_dir (config::defaultDumpDir)
  bool checkCollectives = false;
  static Settings fromConfig(const Config& config);
};

// One group as the supervisor sees it. Owned by its ProcessGroup (shared with the
// supervisor's threads while they use it).
struct GroupMonitor {
  std::string name;
  int rank = 0;
  int worldSize = 1;
  std::vector<int> globalRanks;
  StorePtr store;     // the group's store ("<name>/<generation>/")
  StorePtr jobStore;  // the job's store (trace dump requests)
  OnError onError = OnError::Abort;
  std::function<void(const std::string&)> abortGroup;  // set once by the group

  // Progress of collectives (not p2p), written by the caller thread and the watchdog.
  std::atomic<uint64_t> lastIssued{0};
  std::atomic<uint8_t> lastIssuedOp{0};
  std::atomic<uint64_t> lastCompleted{0};

  // Caller thread: the seq and op of the call now inside a backend (0: none). A backend
  // that runs an op inline (self; shm when idle) waits for peers inside that call, before
  // any Work exists for the watchdog to fail: a lost peer fails it through abort().
  std::atomic<uint64_t> inBackendCall{0};
  std::atomic<uint8_t> inBackendCallOp{0};

  // Set by the heartbeat thread (and the watchdog, on a backend's own evidence), read by
  // the watchdog: peers found lost and why.
  std::mutex lostMutex;
  std::map<int, std::string> lostPeers;
  std::set<int> leftPeers;  // destroyed their group (a clean exit): silent, not lost
  std::atomic<bool> anyPeerLost{false};
  // The backend call the watchdog aborted because a peer was lost, and the verdict
  // track() gives its work (under lostMutex).
  uint64_t abortedCallSeq = 0;
  std::string abortedCallVerdict;
  std::atomic<bool> anyPeerLeft{false};
  // Once a store call failed, nothing calls the store again: the client would retry
  // connecting until its timeout, stalling the supervisor's threads.
  std::atomic<bool> storeLost{false};
  std::atomic<bool> incidentLogFull{false};  // set once the incident log refused a line (logged once)

  // Lines of the incident log already answered: the heartbeat thread answers them, and
  // the watchdog too while it waits for acks to an incident of its own.
  std::mutex incidentMutex;
  int64_t seenIncident = 0;

  // Heartbeat thread only.
  std::vector<int> watched;
  std::vector<int64_t> watchedBeat;
  std::vector<Clock::time_point> watchedSince;
  std::vector<bool> watchedLeft;  // the peer destroyed its group (leftKey): not lost
  Clock::time_point nextBeat{};

  // Watchdog thread only.
  uint64_t callSeenInBackend = 0;  // inBackendCall at the previous poll
  int64_t incidentsRaised = 0;
  std::string lastIncident;  // the desync report and where the dumps are
  Clock::time_point lastIncidentAt{};

  int globalRank(int r) const { return r >= 0 && r < static_cast<int>(globalRanks.size()) ? globalRanks[r] : r; }
  void markLost(int peer, const std::string& why);
  // "peer N lost: why; peer M left: ..." for every peer lost or left (takes lostMutex).
  std::string lostText();
};

class Supervisor;

// The Work a group returns while supervised: the backend's work plus the supervisor's
// verdict (a richer TimeoutError / PeerLostError) when an incident ends it.
class SupervisedWork final : public Work {
 public:
  SupervisedWork(const OpContext& ctx, WorkPtr inner, std::shared_ptr<GroupMonitor> group, uint64_t recordId,
                 Clock::time_point issued, int64_t bytes, Millis verdictWait);
  bool isCompleted() override;
  bool wait(Millis timeout = Millis(0)) override;
  std::exception_ptr exception() override;
  void abort(const std::string& reason) override { inner_->abort(reason); }
  FuturePtr future() override { return inner_->future(); }
  int sourceRank() const override { return inner_->sourceRank(); }

  // Watchdog thread: ends the work with `error` and wakes every waiter.
  void setVerdict(std::exception_ptr error, const std::string& message);
  bool hasVerdict();
  void noteEnd();  // records when completion was first seen
  void attachTo(std::weak_ptr<Supervisor> supervisor) { supervisor_ = std::move(supervisor); }
  // True for the one caller that records the completion (see Supervisor::complete).
  bool claimFinalize() { return !finalized_.exchange(true, std::memory_order_acq_rel); }
  bool finalized() const { return finalized_.load(std::memory_order_acquire); }
  // Watchdog thread only: when a backend's peer-lost error was first seen.
  Clock::time_point peerErrorSeen{};

  const WorkPtr& inner() const { return inner_; }
  const std::shared_ptr<GroupMonitor>& group() const { return group_; }
  uint64_t recordId() const { return recordId_; }
  Clock::time_point issued() const { return issued_; }
  Clock::time_point deadline() const { return issued_ + ctx_.timeout; }
  int64_t bytes() const { return bytes_; }
  int64_t endedUs() const { return endedUs_.load(std::memory_order_acquire); }
  const OpContext& context() const { return ctx_; }

  // Set by track() before the work is shared.
  std::string backend;
  int64_t issuedUs = 0;  // wall clock, as the flight recorder shows it

 private:
  WorkPtr inner_;
  std::shared_ptr<GroupMonitor> group_;
  uint64_t recordId_;
  Clock::time_point issued_;
  int64_t bytes_;
  Millis verdictWait_;
  std::atomic<int64_t> endedUs_{0};
  std::atomic<bool> finalized_{false};
  std::weak_ptr<Supervisor> supervisor_;  // weak: a work may outlive every group
  std::mutex mutex_;
  std::condition_variable cv_;
  std::atomic<bool> verdictSet_{false};  // verdict_ is set: lets the common path skip mutex_
  std::exception_ptr verdict_;  // under mutex_, with its code and message:
  ErrorCode verdictCode_ = ErrorCode::Backend;
  std::string verdictMessage_;
  std::exception_ptr freshVerdict() const;  // a new copy of the verdict; call under mutex_
};

// True once after each SIGUSR1 (when commhost installed the handler).
bool takeSigusr1();

class Supervisor : public std::enable_shared_from_this<Supervisor> {
 public:
  // The process's supervisor, started with `settings` by the first group alive and
  // stopped when the last group releases it.
  static std::shared_ptr<Supervisor> forProcess(const Settings& settings);
  static std::shared_ptr<Supervisor> current();  // null when no group is alive
  explicit Supervisor(const Settings& settings);
  ~Supervisor();
  const Settings& settings() const { return settings_; }

  void attach(const std::shared_ptr<GroupMonitor>& group);
  void detach(const GroupMonitor* group);

  // Caller thread: records the op and returns the work the caller gets.
  WorkPtr track(const std::shared_ptr<GroupMonitor>& group, const OpContext& ctx, const std::string& backend,
                DType dtype, int64_t bytes, Clock::time_point issued, WorkPtr inner);

  // Any thread that sees the work end; records it once (flight recorder, progress, hooks).
  void complete(SupervisedWork& work);
  void publishCompletion(const std::shared_ptr<GroupMonitor>& group, const OpContext& ctx, const std::string& backend,
                         int64_t bytes, int64_t issuedUs, int64_t endedUs, const std::string& error);

  int addHook(const GroupMonitor* group, CompletionHook hook);
  void removeHook(int id);

  // Writes rank<N>.json (N: the rank of the first group attached); returns its path.
  std::string dump(const std::string& reason);
  nlohmann::json dumpJson(const std::string& reason);

  void requestSignalDump() { signalDump_.store(true, std::memory_order_relaxed); }

 private:
  void watchdogLoop();
  void heartbeatLoop();
  // Heartbeat and watchdog threads, on each wake-up from a sleep of `expected` begun at
  // `asleep`: whether it came seconds late (the process was not scheduled); logs it once
  // per pause, whichever thread wakes first.
  bool noteAlive(Clock::time_point asleep, Millis expected);
  void heartbeatTick(uint64_t& lastWatchdogTicks, Clock::time_point& lastAdvance);
  void logUnexpected(const char* thread, std::exception_ptr error);
  void hookLoop();
  // watchdog.cc
  void pollOnce();
  void raiseIncident(SupervisedWork& work, std::exception_ptr cause);
  // A peer of `g` is lost while a caller is inside a backend call: abort the backends.
  void failBackendCall(GroupMonitor& g);
  std::string collectDumps(GroupMonitor& g, const std::string& reason);
  void applyOnError(GroupMonitor& g, const std::string& message);
  // heartbeat.cc
  void beat(GroupMonitor& g, Clock::time_point now);
  // Acknowledges other ranks' incidents (after a dump unless this rank has just dumped
  // for one of its own) and takes note of peers they found lost.
  void answerIncidents(GroupMonitor& g, bool dumpFirst = true);
  void reportWatchdogStall(Millis stalled);
  void noteIncidentLogFull(GroupMonitor& g);
  std::vector<std::shared_ptr<GroupMonitor>> groups();

  Settings settings_;
  std::shared_ptr<Logger> logger_;
  FlightRecorder recorder_;

  std::mutex mutex_;  // guards groups_, inflight_, pruneAt_, stopping_
  std::condition_variable wake_;
  bool stopping_ = false;
  std::vector<std::weak_ptr<GroupMonitor>> groups_;
  std::vector<std::shared_ptr<SupervisedWork>> inflight_;
  size_t pruneAt_ = 1024;

  std::mutex hookMutex_;  // guards hooks_, nextHook_, hookQueue_, hookStopping_
  std::condition_variable hookWake_;
  std::map<int, std::pair<const GroupMonitor*, CompletionHook>> hooks_;  // id -> (group, hook); detach removes
  int nextHook_ = 1;
  // The event's group is held, so its address cannot be reused by a new group meanwhile.
  std::deque<std::pair<std::shared_ptr<GroupMonitor>, CompletionEvent>> hookQueue_;
  bool hookStopping_ = false;
  std::atomic<bool> hasHooks_{false};

  Clock::time_point lastErrorDump_{};  // watchdog thread
  size_t droppedHookEvents_ = 0;       // under hookMutex_
  static constexpr size_t kMaxQueuedHookEvents = 1 << 16;
  std::atomic<uint64_t> watchdogTicks_{0};
  // Steady-clock ns of the last "not scheduled" report (noteAlive, either thread).
  std::atomic<int64_t> lastPauseReport_{0};
  std::atomic<bool> signalDump_{false};
  int64_t seenTraceDump_ = -1;             // heartbeat thread; -1 = not read yet
  bool watchdogStallReported_ = false;     // heartbeat thread
  std::mutex dumpMutex_;                   // one dump file write at a time

  std::thread watchdog_;
  std::thread heartbeat_;
  std::thread hookThread_;
};

}  // namespace commhost::supervisor
