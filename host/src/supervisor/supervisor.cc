// SPDX-License-Identifier: Apache-2.0
// The Supervisor's lifecycle and owner, the per-op path (track), completions and dumps.
#include "supervisor.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <typeinfo>

#include "../core/tensor_work.h"
#include "commhost/errors.h"
#include "desync.h"
#include "heartbeat.h"
#include "watchdog.h"

namespace commhost::supervisor {
namespace {

std::atomic<bool> sigusr1Seen{false};  // written by the signal handler only

void onSigusr1(int) { sigusr1Seen.store(true, std::memory_order_relaxed); }

// `handler` for `signal`, unless the application already handles it (or ignores it).
void installIfDefault(int signal, void (*handler)(int)) {
  struct sigaction current {};
  if (sigaction(signal, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) return;
  struct sigaction sa {};
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(signal, &sa, nullptr);
}

// SIGUSR1 asks for a dump.
void installSigusr1Once() {
  static std::once_flag once;
  std::call_once(once, [] { installIfDefault(SIGUSR1, onSigusr1); });
}

std::atomic<int> sigtermWatchers{0};   // SigtermWatch objects alive
std::atomic<bool> sigtermSeen{false};  // written by the signal handler only

// Async-signal-safe: atomics, signal() and raise() only.
void onSigterm(int signal) {
  if (sigtermWatchers.load() == 0 || sigtermSeen.exchange(true)) {
    ::signal(signal, SIG_DFL);
    ::raise(signal);
  }
}

void installSigtermOnce() {
  static std::once_flag once;
  std::call_once(once, [] { installIfDefault(SIGTERM, onSigterm); });
}

OnError parseOnError(const std::string& s) {
  if (s == "teardown") return OnError::Teardown;
  if (s == "report") return OnError::Report;
  return OnError::Abort;
}

// The owner of the process's supervisor: the groups alive hold leases on it.
struct ProcessSlot {
  Mutex mu;
  std::shared_ptr<Supervisor> current GUARDED_BY(mu);
  int leases GUARDED_BY(mu) = 0;
};

ProcessSlot& slot() {
  static ProcessSlot* s = new ProcessSlot;  // never destroyed: groups may outlive static destructors
  return *s;
}

}  // namespace

bool takeSigusr1() { return sigusr1Seen.exchange(false, std::memory_order_relaxed); }

SigtermWatch::SigtermWatch() {
  sigtermWatchers.fetch_add(1);
  installSigtermOnce();
}

SigtermWatch::~SigtermWatch() {
  // The last watcher gone with a SIGTERM unreported: the process still ends.
  if (sigtermWatchers.fetch_sub(1) == 1 && sigtermSeen.load()) endProcess();
}

bool SigtermWatch::pending() { return sigtermSeen.load(); }

void SigtermWatch::endProcess() {
  Logger::flushAll();
  ::signal(SIGTERM, SIG_DFL);
  ::raise(SIGTERM);
  ::_exit(128 + SIGTERM);  // SIGTERM blocked in this thread: end as its default action would have
}

Settings Settings::fromConfig(const Config& config) {
  const OptionValues& h = config.host;
  Settings s;
  s.enabled = h.getBool("supervisor.enabled");
  s.onError = parseOnError(h.getString("supervisor.on_error"));
  s.shrinkOnPeerLoss = h.getString("supervisor.on_peer_loss") == "shrink";
  s.reportOnSigterm = h.getString("supervisor.on_sigterm") == "report";
  s.minRanks = static_cast<int>(h.getInt("supervisor.min_ranks"));
  s.poll = h.getDuration("supervisor.watchdog.poll");
  s.heartbeatInterval = h.getDuration("supervisor.heartbeat.interval");
  s.heartbeatTimeout = h.getDuration("supervisor.heartbeat.timeout");
  s.entries = static_cast<size_t>(h.getInt("supervisor.flight_recorder.entries"));
  s.timeEvery = std::stoull(h.getString("supervisor.flight_recorder.time_every"));
  s.dumpDir = h.getString("supervisor.flight_recorder.dump_dir");
  s.checkCollectives = h.getBool("debug.check_collectives");
  return s;
}

std::shared_ptr<Supervisor> Supervisor::acquire(const Settings& settings) {
  ProcessSlot& s = slot();
  MutexLock lock(&s.mu);
  if (!s.current) s.current = std::make_shared<Supervisor>(settings, clockForNewSupervisor());
  ++s.leases;
  return s.current;
}

void Supervisor::release(std::shared_ptr<Supervisor> sup, const GroupMonitor* group) {
  sup->detach(group);
  std::shared_ptr<Supervisor> retiring;
  {
    ProcessSlot& s = slot();
    MutexLock lock(&s.mu);
    if (s.current == sup && --s.leases == 0) retiring = std::move(s.current);
  }
  sup.reset();
  if (!retiring) return;
  // The last group may be released by a hook that captured it, on the hook thread, which
  // cannot join itself: a thread of its own stops the supervisor then.
  if (retiring->onOwnThread()) std::thread([r = std::move(retiring)] { r->stop(); }).detach();
  else retiring->stop();
}

std::shared_ptr<Supervisor> Supervisor::current() {
  ProcessSlot& s = slot();
  MutexLock lock(&s.mu);
  return s.current;
}

Supervisor::Supervisor(const Settings& settings, std::shared_ptr<Clock> clock)
    : settings_(settings),
      clock_(std::move(clock)),
      logger_(std::make_shared<Logger>("commhost.supervisor", "pid " + std::to_string(::getpid()))),
      recorder_(settings.entries),
      dumps_(settings.dumpDir, logger_),
      pauses_(settings.poll, logger_),
      hooks_(logger_),
      timeMask_(settings.timeEvery > 0 && (settings.timeEvery & (settings.timeEvery - 1)) == 0 ? settings.timeEvery - 1
                                                                                               : 0) {
  installSigusr1Once();
  watchdog_ = std::make_unique<Watchdog>(*this);
  heartbeat_ = std::make_unique<Heartbeat>(*this);
}

Supervisor::~Supervisor() { stop(); }

void Supervisor::stop() {
  // The heartbeat first: it reads the watchdog's ticks.
  heartbeat_.reset();
  watchdog_.reset();
  hooks_.stop();
}

bool Supervisor::onOwnThread() const {
  return hooks_.onHookThread() || (watchdog_ && watchdog_->onThread()) || (heartbeat_ && heartbeat_->onThread());
}

uint64_t Supervisor::watchdogTicks() const { return watchdog_ ? watchdog_->ticks() : 0; }

void Supervisor::attach(const std::shared_ptr<GroupMonitor>& group) {
  MutexLock lock(&mutex_);
  groups_.push_back(group);
}

// The group's works leave the in-flight list with it: nothing may watch a group whose
// backends are gone, and a work must not keep the supervisor's lists alive.
void Supervisor::detach(const GroupMonitor* group) {
  // Peers watching this rank must not take the end of its heartbeat for a death. Skipped
  // once the store failed: the call would only retry connecting until its timeout.
  if (!group->storeLost.load(std::memory_order_acquire) && group->worldSize > 1) {
    try {
      group->store->set(leftKey(group->rank), toBytes("1"));
    } catch (const std::exception& e) {
      logger_->warn(ErrorContext{group->name, group->rank}.format() + "could not tell the peers this rank left (" +
                    e.what() + "); they may report it lost");
    }
  }
  std::vector<std::shared_ptr<SupervisedWork>> leaving;
  {
    MutexLock lock(&mutex_);
    for (size_t i = 0; i < inflight_.size();) {
      if (inflight_[i]->group().get() == group) {
        leaving.push_back(std::move(inflight_[i]));
        inflight_[i] = std::move(inflight_.back());
        inflight_.pop_back();
      } else {
        ++i;
      }
    }
    for (size_t i = 0; i < groups_.size();) {
      auto g = groups_[i].lock();
      if (!g || g.get() == group) {
        groups_[i] = std::move(groups_.back());
        groups_.pop_back();
      } else {
        ++i;
      }
    }
  }
  hooks_.removeGroup(group);
  for (auto& w : leaving) {
    if (!w->finalized() && !w->inner()->isCompleted())
      w->setVerdict(std::make_exception_ptr(AbortedError("its group was destroyed while it was in flight")),
                    "its group was destroyed while it was in flight");
    complete(*w);
  }
}

std::vector<std::shared_ptr<GroupMonitor>> Supervisor::groups() {
  MutexLock lock(&mutex_);
  std::vector<std::shared_ptr<GroupMonitor>> out;
  for (auto& w : groups_)
    if (auto g = w.lock()) out.push_back(std::move(g));
  return out;
}

std::vector<std::shared_ptr<SupervisedWork>> Supervisor::running() {
  std::vector<std::shared_ptr<SupervisedWork>> out;
  MutexLock lock(&mutex_);
  for (size_t i = 0; i < inflight_.size();) {
    if (inflight_[i]->finalized()) {
      inflight_[i] = std::move(inflight_.back());
      inflight_.pop_back();
      continue;
    }
    out.push_back(inflight_[i]);
    ++i;
  }
  return out;
}

std::shared_ptr<SupervisedWork> Supervisor::oldestInFlight() {
  std::shared_ptr<SupervisedWork> oldest;
  MutexLock lock(&mutex_);
  for (const auto& w : inflight_)
    if (!w->finalized() && (!oldest || w->issued() < oldest->issued())) oldest = w;
  return oldest;
}

void Supervisor::logUnexpected(const char* thread, const std::exception_ptr& error) {
  logger_->error(std::string("the supervisor's ") + thread + " thread caught an unexpected error: " +
                 factsOf(error).what + "; it goes on. Please report this with the log");
}

std::string Supervisor::waitGroupIdle(const GroupMonitor* group, TimePoint deadline) {
  std::vector<std::shared_ptr<SupervisedWork>> mine;
  {
    MutexLock lock(&mutex_);
    for (const auto& w : inflight_)
      if (w->group().get() == group && !w->finalized()) mine.push_back(w);
  }
  // Outside mutex_: waiting completes works, and completion takes it.
  for (auto& w : mine) {
    const auto left = std::chrono::duration_cast<Millis>(deadline - clock_->now());
    try {
      if (left.count() > 0) w->wait(left);
    } catch (const std::exception&) {
      // A failed work is over (its own waiter gets the error); a wait that timed out is
      // told apart below.
    }
    if (!w->isCompleted())
      return std::string(opName(w->context().op)) + " seq " + std::to_string(w->context().seq) + " on backend '" +
             w->backend + "'";
  }
  return {};
}

// Long (88 lines), and listed so in tools/lint/long-functions.txt: this is every op's path,
// its records filled in place by the lambdas below; split into calls, it cost 8-10 ns more
// per 8 B op (BM_AllreduceDispatch, 2026-11-30).
WorkPtr Supervisor::track(const std::shared_ptr<GroupMonitor>& group, const OpContext& ctx, const std::string& backend,
                          uint64_t generation, DType dtype, int64_t bytes, TimePoint issued, WorkPtr inner,
                          const OutputSpec& expect, const RecordNamesMemo* memo) {
  if (!isPointToPoint(ctx.op)) {
    group->lastIssued.store(ctx.seq, std::memory_order_relaxed);
    group->lastIssuedOp.store(static_cast<uint8_t>(ctx.op), std::memory_order_relaxed);
  }
  // A backend that ran the op inline (self; shm when idle) returns it done: nothing is
  // left to watch, so it is recorded as completed and handed back as it is, once its
  // value is the call's outputs (a CompletedWork's or TensorWork's is readable for free;
  // others are checked in SupervisedWork::future()).
  // A CompletedWork or TensorWork (both final) succeeded and has no device time: no
  // virtual call asks.
  const Work& backendWork = *inner;
  const bool plain = typeid(backendWork) == typeid(TensorWork) || typeid(backendWork) == typeid(CompletedWork);
  bool done = plain || (inner->isCompleted() && !inner->exception());
  if (done && !inlineValueMatches(*inner, expect)) {
    auto failed = std::make_shared<AsyncWork>(ctx);
    failed->fail(brokenContract(ctx, backend, inlineValueMismatch(*inner, expect)));
    inner = std::move(failed);
    done = false;
  }
  const std::optional<double> deviceMs = done && !plain ? inner->deviceMs() : std::nullopt;
  int64_t scheduledUs = 0, startedUs = 0;
  bool timed = true;
  if (issued != TimePoint{}) {
    scheduledUs = wallMicros(issued);
    startedUs = wallMicros(FastClock::now());
  } else if (!done || hooks_.any()) {  // not read at issue (timesOp); a hook came since
    issued = clock_->now();
    scheduledUs = startedUs = wallMicros(issued);
  } else {  // a small op run inline that timesOp() left out: no clock read (see fill)
    timed = false;
  }
  // Written in place: this is on every op's path, and a record built on the stack and
  // copied in cost about 17 ns of the supervisor's ~100 ns per 8 B op. An op done here
  // goes to this thread's lane (no lock), one still running to the ring.
  static_assert(sizeof(OpRecord) == 416, "OpRecord changed: set the new field below");
  const auto fill = [&](OpRecord& r) {
    // The ring's record of an untimed op (its thread has no lane): the coarse clock. A
    // lane's is stamped by the recorder, without a clock read (emplaceInLane).
    if (!timed) scheduledUs = startedUs = coarseWallMicros();
    r.generation = generation;
    copyName(r.group, sizeof(r.group), group->name);
    copyName(r.backend, sizeof(r.backend), backend);
    r.rank = group->rank;
    r.worldSize = group->worldSize;
    r.op = ctx.op;
    r.seq = ctx.seq;
    r.dtype = dtype;
    r.bytes = bytes;
    r.numel = bytes >> __builtin_ctzll(elementBytes(dtype));  // a power of two (types.cc): no division per op
    r.state = done ? OpState::Completed : OpState::Started;
    r.timed = timed;
    r.counted = false;
    r.scheduledUs = scheduledUs;
    r.startedUs = startedUs;
    r.endedUs = done ? startedUs : 0;
    r.deviceMs = deviceMs.value_or(-1);
  };
  if (done) {
    // The lane's record: one cache line, the names interned; the ring's (a thread without
    // a lane, an op with a device time) only when that is refused.
    const auto fillLane = [&](LaneEntry& e) {
      e.seq = ctx.seq;
      e.generation = generation;
      e.bytes = bytes;
      e.scheduledUs = scheduledUs;
      e.startedAfterUs = static_cast<int32_t>(std::clamp<int64_t>(startedUs - scheduledUs, INT32_MIN, INT32_MAX));
      e.op = ctx.op;
      e.dtype = dtype;
      e.timed = timed;
    };
    if (settings_.entries > 0 &&
        (deviceMs || !recorder_.emplaceInLane(recordNamesOf(recorder_, *group, backend, memo), fillLane)))
      recorder_.emplace(fill);
    // This is the issuing thread, the one that hands out seqs (one at a time per group):
    // whoever else moves lastCompleted meanwhile (a waiter or the watchdog ending an
    // earlier queued op) moves it to a smaller seq, so a plain store keeps it monotonic
    // where publishCompletion's compare-exchange is a locked instruction on every op.
    if (!isPointToPoint(ctx.op) && group->lastCompleted.load(std::memory_order_relaxed) < ctx.seq)
      group->lastCompleted.store(ctx.seq, std::memory_order_relaxed);
    if (hooks_.any()) publishHooks(group, ctx, backend, bytes, scheduledUs, startedUs, std::string(), deviceMs);
    return inner;
  }
  const uint64_t id = recorder_.emplace(fill);
  return watch(group, ctx, backend, id, issued, scheduledUs, bytes, std::move(inner), expect);
}

WorkPtr Supervisor::watch(const std::shared_ptr<GroupMonitor>& group, const OpContext& ctx, const std::string& backend,
                          uint64_t recordId, TimePoint issued, int64_t issuedUs, int64_t bytes, WorkPtr inner,
                          const OutputSpec& expect) {
  // The watchdog aborted this very call because a peer was lost: that is its verdict.
  std::string lostVerdict;
  if (inner->isCompleted() && group->anyPeerLost.load(std::memory_order_acquire)) {
    MutexLock lock(&group->lostMutex);
    if (group->abortedCallSeq == ctx.seq) lostVerdict = group->abortedCallVerdict;
  }
  const Millis verdictWait = settings_.heartbeatTimeout + settings_.heartbeatInterval + 4 * settings_.poll +
                             Millis(2000);
  auto work = std::make_shared<SupervisedWork>(ctx, std::move(inner), group, recordId, issued, bytes, verdictWait,
                                               clock_);
  work->attachTo(weak_from_this());
  work->backend = backend;
  work->issuedUs = issuedUs;
  work->expect = expect;
  if (!lostVerdict.empty())
    work->setVerdict(std::make_exception_ptr(
                         PeerLostError(lostVerdict, ErrorContext{group->name, group->rank, opName(ctx.op), ctx.seq})),
                     lostVerdict);
  MutexLock lock(&mutex_);
  // Works whose completion a waiter already recorded leave in batches, so a tight loop
  // of ops keeps the list short without the watchdog.
  if (inflight_.size() >= pruneAt_) {
    inflight_.erase(std::remove_if(inflight_.begin(), inflight_.end(),
                                   [](const std::shared_ptr<SupervisedWork>& w) { return w->finalized(); }),
                    inflight_.end());
    pruneAt_ = std::max<size_t>(1024, 2 * inflight_.size());
  }
  inflight_.push_back(work);
  return work;
}

// Called once per work, by whichever thread first sees it end (a waiter or the watchdog).
void Supervisor::complete(SupervisedWork& work) {
  if (!work.claimFinalize()) return;
  const int64_t ended = work.endedUs() ? work.endedUs() : wallMicros(FastClock::now());
  std::exception_ptr error = work.exception();
  std::string message;
  if (error) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      message = e.what();
    } catch (...) {
      message = "unknown error";
    }
  }
  // Asked after the backend said the work ended: a device backend's events are done then.
  const std::optional<double> deviceMs = error ? std::nullopt : work.deviceMs();
  recorder_.finish(work.recordId(), error ? OpState::Failed : OpState::Completed, ended, message,
                   deviceMs.value_or(-1));
  publishCompletion(work.group(), work.context(), work.backend, work.bytes(), work.issuedUs, ended, message, deviceMs);
}

// Progress and hooks of a work that ended (any thread; complete() or track()'s inline path).
void Supervisor::publishCompletion(const std::shared_ptr<GroupMonitor>& group, const OpContext& ctx,
                                   const std::string& backend, int64_t bytes, int64_t issuedUs, int64_t endedUs,
                                   const std::string& error, std::optional<double> deviceMs) {
  GroupMonitor& g = *group;
  if (error.empty() && !isPointToPoint(ctx.op)) {
    uint64_t seen = g.lastCompleted.load(std::memory_order_relaxed);
    while (seen < ctx.seq && !g.lastCompleted.compare_exchange_weak(seen, ctx.seq, std::memory_order_relaxed)) {
    }
  }
  if (hooks_.any()) publishHooks(group, ctx, backend, bytes, issuedUs, endedUs, error, deviceMs);
}

void Supervisor::publishHooks(const std::shared_ptr<GroupMonitor>& group, const OpContext& ctx,
                              const std::string& backend, int64_t bytes, int64_t issuedUs, int64_t endedUs,
                              const std::string& error, std::optional<double> deviceMs) {
  const GroupMonitor& g = *group;
  CompletionEvent ev;
  ev.group = g.name;
  ev.rank = g.rank;
  ev.op = ctx.op;
  ev.seq = ctx.seq;
  ev.bytes = bytes;
  ev.backend = backend;
  const auto toTime = [](int64_t us) { return std::chrono::system_clock::time_point(std::chrono::microseconds(us)); };
  ev.start = toTime(issuedUs);
  ev.end = toTime(std::max(endedUs, issuedUs));
  ev.duration = std::chrono::duration_cast<std::chrono::microseconds>(ev.end - ev.start);
  ev.error = error;
  ev.deviceMs = deviceMs;
  hooks_.post(group, std::move(ev));
}

FlightDump Supervisor::dumpNow(const std::string& reason) {
  // Works a waiter has not looked at yet may have finished: show them as they are.
  std::vector<std::shared_ptr<SupervisedWork>> running;
  {
    MutexLock lock(&mutex_);
    running = inflight_;
  }
  for (auto& w : running)  // outside mutex_, as in pollOnce
    if (!w->finalized() && w->inner()->isCompleted()) w->noteEnd();
  FlightDump d;
  d.reason = reason;
  d.pid = ::getpid();
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  d.host = host;
  d.timeUs = wallMicros();
  d.entriesCapacity = recorder_.capacity();
  for (auto& g : groups()) {
    if (d.rank < 0) d.rank = g->globalRank(g->rank);
    const std::set<int> left = g->left();
    d.groups.push_back({g->name, g->rank, g->worldSize, g->globalRanks, g->newestCollective().seq,
                        g->lastCompleted.load(), g->lost(), std::vector<int>(left.begin(), left.end())});
  }
  for (const auto& r : recorder_.snapshot()) d.entries.push_back(toDumpOp(r));
  d.swaps = recorder_.swaps();
  d.memberships = recorder_.memberships();
  d.shadows = recorder_.shadows();
  return d;
}

void Supervisor::recordSwap(SwapRecord record) {
  if (record.outcome == "rerouted") {
    std::string what;
    for (const auto& line : record.rerouted) what += (what.empty() ? "" : "; ") + line;
    events_.add("rerouted", record.group,
                "[group " + record.group + " rank " + std::to_string(record.rank) + "] live routing: generation " +
                    std::to_string(record.fromGeneration) + " -> " + std::to_string(record.toGeneration) + ": " + what);
    recorder_.addSwap(std::move(record));
    return;
  }
  const bool committed = record.outcome == "committed";
  events_.add(committed ? "swap_committed" : "swap_rolled_back", record.group,
              "[group " + record.group + " rank " + std::to_string(record.rank) + "] swap from generation " +
                  std::to_string(record.fromGeneration) +
                  (committed ? " committed generation " + std::to_string(record.toGeneration)
                             : " rolled back: " + record.error));
  recorder_.addSwap(std::move(record));
}

void Supervisor::recordMembership(MembershipRecord m) {
  std::string removed;
  for (int r : m.removed) removed += (removed.empty() ? "" : ", ") + std::to_string(r);
  events_.add("membership", m.group,
              "[group " + m.group + " rank " + std::to_string(m.rankBefore) + "] " + m.outcome + ": " +
                  std::to_string(m.worldBefore) + " -> " + std::to_string(m.worldAfter) + " ranks" +
                  (removed.empty() ? "" : " (removed " + removed + ")") + ", generation " +
                  std::to_string(m.toGeneration) + (m.error.empty() ? "" : ": " + m.error));
  recorder_.addMembership(std::move(m));
}

void Supervisor::recordShadow(ShadowEvent e) {
  {
    MutexLock lock(&mutex_);
    ShadowTally& t = shadowTallies_[{e.group, e.op, e.backend, e.shadow}];
    if (t.group.empty()) t = ShadowTally{e.group, e.op, e.backend, e.shadow, 0, 0, 0};
    (e.outcome == "agree" ? t.agree : e.outcome == "disagree" ? t.disagree : t.failed)++;
  }
  if (e.outcome != "agree")
    events_.add("shadow_" + e.outcome, e.group,
                "[group " + e.group + " rank " + std::to_string(e.rank) + " " + e.op + " seq " + std::to_string(e.seq) +
                    "] shadow " + e.shadow + " " + (e.outcome == "disagree" ? "disagreed with " : "failed beside ") +
                    e.backend + (e.detail.empty() ? "" : ": " + e.detail));
  recorder_.addShadow(std::move(e));
}

std::vector<ShadowTally> Supervisor::shadowTallies() {
  MutexLock lock(&mutex_);
  std::vector<ShadowTally> out;
  for (const auto& [key, t] : shadowTallies_) out.push_back(t);
  return out;
}

std::string Supervisor::dump(const std::string& reason) {
  return dumps_.write([&] { return dumpNow(reason); }, reason);
}

}  // namespace commhost::supervisor

namespace commhost {

std::string dumpFlightRecorder(const std::string& reason) {
  auto sup = supervisor::Supervisor::current();
  return sup ? sup->dump(reason) : std::string();
}

std::string flightRecorderJson(const std::string& reason) {
  auto sup = supervisor::Supervisor::current();
  return sup ? encodeFlightDump(sup->dumpNow(reason)) : std::string();
}

void requestTraceDump(Store& jobStore, const std::string& reason) {
  jobStore.append(supervisor::kTraceDumpReasons, toBytes(reason + "\n"));
  jobStore.add(supervisor::kTraceDumpCount, 1);
}

}  // namespace commhost
