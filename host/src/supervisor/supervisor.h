// SPDX-License-Identifier: Apache-2.0
// Internal: the process-wide Supervisor and the parts it composes, each with one owner:
// - HookDispatcher (hook_dispatcher.h): the completion hooks and their thread;
// - DumpWriter (dump_writer.h): dump files;
// - Watchdog (watchdog.h): its thread completes works, turns deadlines passed and lost
//   peers into incidents, writes desync reports and applies on_error;
// - Heartbeat (heartbeat.h): its thread publishes heartbeats and progress, watches
//   peers, answers incidents and dump requests, checks that the watchdog advances;
// - per group (GroupMonitor, group_monitor.h), its IncidentChannel (incident_channel.h)
//   over the codec (messages.h);
// - FlightRecorder (flight_recorder.h); time from an injectable Clock (clock.h).
// The Supervisor itself holds the groups and the works in flight (callers' track()).
//
// Ownership: the process slot in supervisor.cc owns the supervisor. acquire() starts it
// for the first group; release() from the last group stops it, on the releasing thread
// or, when that is one of the supervisor's own threads (a hook that held the last
// group), on a thread started for that: it is never stopped on its own threads.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "clock.h"
#include "commhost/config.h"
#include "commhost/job_status.h"
#include "commhost/logging.h"
#include "commhost/mutex.h"
#include "commhost/supervisor.h"
#include "commhost/work.h"
#include "dump_writer.h"
#include "events.h"
#include "flight_recorder.h"
#include "group_monitor.h"
#include "hook_dispatcher.h"
#include "output_check.h"
#include "record_names_memo.h"
#include "supervised_work.h"

namespace commhost::supervisor {

struct Settings {
  bool enabled = true;
  OnError onError = OnError::Abort;
  bool shrinkOnPeerLoss = false;  // supervisor.on_peer_loss: shrink
  bool reportOnSigterm = true;    // supervisor.on_sigterm: report
  int minRanks = 1;               // supervisor.min_ranks
  Millis poll{100};
  Millis heartbeatInterval{1000};
  Millis heartbeatTimeout{10000};
  size_t entries = 2048;
  uint64_t timeEvery = 64;  // supervisor.flight_recorder.time_every: a power of two (the schema's choices)
  std::string dumpDir;      // the config resolves an empty dump_dir (config::defaultDumpDir)
  bool checkCollectives = false;
  static Settings fromConfig(const Config& config);
};

// True once after each SIGUSR1 (when commhost installed the handler).
bool takeSigusr1();

// supervisor.on_sigterm: report. A watchdog that will report a SIGTERM holds a
// SigtermWatch; with none alive (or at a second SIGTERM) the handler ends the process at
// once, as SIGTERM's default action would. The handler is installed only where SIGTERM has
// its default action.
class SigtermWatch {
 public:
  SigtermWatch();
  ~SigtermWatch();
  SigtermWatch(const SigtermWatch&) = delete;
  SigtermWatch& operator=(const SigtermWatch&) = delete;
  static bool pending();                  // a SIGTERM arrived and waits for its report
  [[noreturn]] static void endProcess();  // SIGTERM's default action, now
};

// A heartbeat or watchdog thread that slept `expected` but woke seconds later was not
// run at all (SIGSTOP, a debugger, a suspended VM): noteAlive says so once per pause,
// whichever thread wakes first, before any verdict it gives.
class PauseDetector {
 public:
  PauseDetector(Millis poll, std::shared_ptr<Logger> logger) : poll_(poll), logger_(std::move(logger)) {}
  bool noteAlive(TimePoint asleep, TimePoint now, Millis expected);

 private:
  const Millis poll_;
  std::shared_ptr<Logger> logger_;
  std::atomic<int64_t> lastReport_{0};  // steady-clock ns of the last report
};

class Watchdog;
class Heartbeat;

class Supervisor : public std::enable_shared_from_this<Supervisor> {
 public:
  static std::shared_ptr<Supervisor> acquire(const Settings& settings);
  // Detaches `group`; the last release stops the supervisor (see the file comment).
  static void release(std::shared_ptr<Supervisor> supervisor, const GroupMonitor* group);
  static std::shared_ptr<Supervisor> current();  // null when no group is alive
  Supervisor(const Settings& settings, std::shared_ptr<Clock> clock);
  ~Supervisor();  // stops it unless its owner did (never on its own threads)
  const Settings& settings() const { return settings_; }
  Clock& clock() { return *clock_; }
  const std::shared_ptr<Clock>& sharedClock() const { return clock_; }
  Logger& logger() { return *logger_; }

  void attach(const std::shared_ptr<GroupMonitor>& group) EXCLUDES(mutex_);
  void detach(const GroupMonitor* group) EXCLUDES(mutex_);

  // Ops of at least this size are always timed: each takes microseconds on any backend,
  // so two clock reads are under 1% of it.
  static constexpr int64_t kAlwaysTimedBytes = 64 << 10;
  // Whether Call::issue reads the clock before calling the backend for this op (its
  // group's issuing thread). The flight recorder times the ops of kAlwaysTimedBytes and
  // more, every timeEvery-th smaller one (by seq: the same ops on every rank), and the
  // first op of the group since the heartbeat's last tick (so that ops issued a few times
  // a second are all timed, however large timeEvery); completion hooks get every op's
  // times. An untimed op the backend completes inline reads no precise clock (its lane
  // record takes an earlier time, FlightRecorder::emplaceInLane; a ring record the coarse
  // clock): two reads are 40-50 ns where the counter is slow to read (a VM here).
  // One that goes on running is timed from track() (the watchdog's start).
  bool timesOp(GroupMonitor& group, uint64_t seq, int64_t bytes) const {
    if (hooks_.any()) return true;
    if (settings_.entries == 0) return false;
    return bytes >= kAlwaysTimedBytes || (seq & timeMask_) == 0 || firstSinceTick(group, recentWallMicros());
  }
  // Caller thread: records the op and returns the work the caller gets. `issued`:
  // TimePoint{} when not read (timesOp() was false). `expect`: the call's outputs,
  // which the work's value must match (output_check.h); a work that completed inline with
  // another value is failed here, a later one when its value is read (future()). `memo`:
  // the caller's for this group and backend, or null (the group's cache is asked).
  WorkPtr track(const std::shared_ptr<GroupMonitor>& group, const OpContext& ctx, const std::string& backend,
                uint64_t generation, DType dtype, int64_t bytes, TimePoint issued, WorkPtr inner,
                const OutputSpec& expect = {}, const RecordNamesMemo* memo = nullptr) EXCLUDES(mutex_);

  // Caller thread of `group` (reconfigure's drain): waits until none of the group's works
  // is in flight, or `deadline`. Returns "" when idle, else which work is still running.
  std::string waitGroupIdle(const GroupMonitor* group, TimePoint deadline) EXCLUDES(mutex_);
  // Each also becomes an event of the job status (a shadow comparison when it did not agree).
  void recordSwap(SwapRecord record);
  void recordShadow(ShadowEvent event) EXCLUDES(mutex_);
  void recordMembership(MembershipRecord record);
  EventLog& events() { return events_; }
  const FlightRecorder& recorder() const { return recorder_; }
  std::vector<ShadowTally> shadowTallies() EXCLUDES(mutex_);

  // Any thread that sees the work end; records it once (flight recorder, progress, hooks).
  void complete(SupervisedWork& work);
  void publishCompletion(const std::shared_ptr<GroupMonitor>& group, const OpContext& ctx, const std::string& backend,
                         int64_t bytes, int64_t issuedUs, int64_t endedUs, const std::string& error,
                         std::optional<double> deviceMs = std::nullopt);
  // track() for an op still running: the SupervisedWork the watchdog follows (its record
  // `recordId`, issued at `issued` / `issuedUs`), handed to the caller.
  WorkPtr watch(const std::shared_ptr<GroupMonitor>& group, const OpContext& ctx, const std::string& backend,
                uint64_t recordId, TimePoint issued, int64_t issuedUs, int64_t bytes, WorkPtr inner,
                const OutputSpec& expect) EXCLUDES(mutex_);
  // The completion event for the hooks (publishCompletion's second half).
  void publishHooks(const std::shared_ptr<GroupMonitor>& group, const OpContext& ctx, const std::string& backend,
                    int64_t bytes, int64_t issuedUs, int64_t endedUs, const std::string& error,
                    std::optional<double> deviceMs);

  int addHook(const GroupMonitor* group, CompletionHook hook) { return hooks_.add(group, std::move(hook)); }
  void removeHook(int id) { hooks_.remove(id); }
  // A group that shrank watches its new membership through a new monitor: its hooks
  // (and their ids) go with it.
  void moveHooks(const GroupMonitor* from, const GroupMonitor* to) { hooks_.moveGroup(from, to); }

  // Writes rank<N>.json (N: the rank of the first group attached); returns its path.
  std::string dump(const std::string& reason);
  FlightDump dumpNow(const std::string& reason) EXCLUDES(mutex_);
  const std::string& dumpDir() const { return dumps_.dir(); }

  void requestSignalDump() { signalDump_.store(true, std::memory_order_relaxed); }
  bool takeSignalDump() { return signalDump_.exchange(false); }

  // For the watchdog and heartbeat.
  std::vector<std::shared_ptr<GroupMonitor>> groups() EXCLUDES(mutex_);
  // The works not finalized yet (those finalized leave the list).
  std::vector<std::shared_ptr<SupervisedWork>> running() EXCLUDES(mutex_);
  std::shared_ptr<SupervisedWork> oldestInFlight() EXCLUDES(mutex_);
  PauseDetector& pauses() { return pauses_; }
  uint64_t watchdogTicks() const;
  void logUnexpected(const char* thread, const std::exception_ptr& error);

 private:
  void stop();  // idempotent; joins the watchdog, heartbeat and hook threads
  bool onOwnThread() const;

  const Settings settings_;
  std::shared_ptr<Clock> clock_;
  std::shared_ptr<Logger> logger_;
  FlightRecorder recorder_;
  DumpWriter dumps_;
  PauseDetector pauses_;
  std::atomic<bool> signalDump_{false};
  EventLog events_;

  Mutex mutex_;
  std::vector<std::weak_ptr<GroupMonitor>> groups_ GUARDED_BY(mutex_);
  std::vector<std::shared_ptr<SupervisedWork>> inflight_ GUARDED_BY(mutex_);
  size_t pruneAt_ GUARDED_BY(mutex_) = 1024;
  std::map<std::vector<std::string>, ShadowTally> shadowTallies_ GUARDED_BY(mutex_);  // group, op, backend, shadow

  // Threads last: they start once the state above exists, and stop() ends them first.
  HookDispatcher hooks_;
  // settings_.timeEvery - 1 (0, timing every op, when it is not a power of two): a mask,
  // not a division, on every op.
  const uint64_t timeMask_;
  std::unique_ptr<Watchdog> watchdog_;
  std::unique_ptr<Heartbeat> heartbeat_;
};

}  // namespace commhost::supervisor
