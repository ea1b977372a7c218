// The Supervisor's lifecycle, the per-op path (track), completion hooks and dumps.
#include "supervisor.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "commhost/errors.h"
#include "desync.h"

namespace commhost::supervisor {
namespace {

std::mutex processMutex;                // guards processSupervisor
std::weak_ptr<Supervisor> processSupervisor;
std::atomic<bool> sigusr1Seen{false};  // written by the signal handler only

void onSigusr1(int) { sigusr1Seen.store(true, std::memory_order_relaxed); }

// SIGUSR1 asks for a dump, unless the application already handles it.
void installSigusr1Once() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction current {};
    if (sigaction(SIGUSR1, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) return;
    struct sigaction sa {};
    sa.sa_handler = onSigusr1;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, nullptr);
  });
}

OnError parseOnError(const std::string& s) {
  if (s == "teardown") return OnError::Teardown;
  if (s == "report") return OnError::Report;
  return OnError::Abort;
}

}  // namespace

bool takeSigusr1() { return sigusr1Seen.exchange(false, std::memory_order_relaxed); }

Settings Settings::fromConfig(const Config& config) {
  const OptionValues& h = config.host;
  Settings s;
  s.enabled = h.getBool("supervisor.enabled");
  s.onError = parseOnError(h.getString("supervisor.on_error"));
  s.poll = h.getDuration("supervisor.watchdog.poll");
  s.heartbeatInterval = h.getDuration("supervisor.heartbeat.interval");
  s.heartbeatTimeout = h.getDuration("supervisor.heartbeat.timeout");
  s.entries = static_cast<size_t>(h.getInt("supervisor.flight_recorder.entries"));
  s.dumpDir = h.getString("supervisor.flight_recorder.dump_dir");
  s.checkCollectives = h.getBool("debug.check_collectives");
  return s;
}

void GroupMonitor::markLost(int peer, const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(lostMutex);
    if (!lostPeers.emplace(peer, why).second) return;
  }
  anyPeerLost.store(true, std::memory_order_release);
}

std::string GroupMonitor::lostText() {
  std::lock_guard<std::mutex> lock(lostMutex);
  std::string lost;
  for (const auto& [peer, why] : lostPeers)
    lost += (lost.empty() ? "" : "; ") +
            (peer >= 0 ? "peer " + std::to_string(globalRank(peer)) + " lost: " : std::string()) + why;
  for (int peer : leftPeers)
    lost += (lost.empty() ? "" : "; ") + std::string("peer ") + std::to_string(globalRank(peer)) +
            " left: it destroyed its side of the group";
  return lost;
}

std::shared_ptr<Supervisor> Supervisor::forProcess(const Settings& settings) {
  std::lock_guard<std::mutex> lock(processMutex);
  auto sup = processSupervisor.lock();
  if (!sup) {
    sup = std::make_shared<Supervisor>(settings);
    processSupervisor = sup;
  }
  return sup;
}

std::shared_ptr<Supervisor> Supervisor::current() {
  std::lock_guard<std::mutex> lock(processMutex);
  return processSupervisor.lock();
}

namespace {
// Set on the hook thread when ~Supervisor runs there (see ~Supervisor).
thread_local bool destroyedOnThisThread = false;
}  // namespace

Supervisor::Supervisor(const Settings& settings)
    : settings_(settings),
      logger_(std::make_shared<Logger>("commhost.supervisor", "pid " + std::to_string(::getpid()))),
      recorder_(settings.entries) {
  installSigusr1Once();
  watchdog_ = std::thread([this] { watchdogLoop(); });
  heartbeat_ = std::thread([this] { heartbeatLoop(); });
  hookThread_ = std::thread([this] { hookLoop(); });
}

Supervisor::~Supervisor() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  {
    std::lock_guard<std::mutex> lock(hookMutex_);
    hookStopping_ = true;
  }
  hookWake_.notify_all();
  // The last group may be released by a hook (it captured the group), on the hook
  // thread: that thread cannot join itself; it leaves hookLoop without touching *this.
  for (std::thread* t : {&watchdog_, &heartbeat_, &hookThread_}) {
    if (t->get_id() != std::this_thread::get_id()) {
      t->join();
    } else {
      destroyedOnThisThread = true;
      t->detach();
    }
  }
}

void Supervisor::attach(const std::shared_ptr<GroupMonitor>& group) {
  std::lock_guard<std::mutex> lock(mutex_);
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
      logger_->warn("[group " + group->name + " rank " + std::to_string(group->rank) +
                    "] could not tell the peers this rank left (" + e.what() + "); they may report it lost");
    }
  }
  std::vector<std::shared_ptr<SupervisedWork>> leaving;
  {
    std::lock_guard<std::mutex> lock(mutex_);
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
  {
    std::lock_guard<std::mutex> lock(hookMutex_);
    for (auto it = hooks_.begin(); it != hooks_.end();)
      it = it->second.first == group ? hooks_.erase(it) : std::next(it);
    hasHooks_.store(!hooks_.empty(), std::memory_order_release);
  }
  for (auto& w : leaving) {
    if (!w->finalized() && !w->inner()->isCompleted())
      w->setVerdict(std::make_exception_ptr(AbortedError("its group was destroyed while it was in flight")),
                    "its group was destroyed while it was in flight");
    complete(*w);
  }
}

std::vector<std::shared_ptr<GroupMonitor>> Supervisor::groups() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::shared_ptr<GroupMonitor>> out;
  for (auto& w : groups_)
    if (auto g = w.lock()) out.push_back(std::move(g));
  return out;
}

WorkPtr Supervisor::track(const std::shared_ptr<GroupMonitor>& group, const OpContext& ctx,
                          const std::string& backend, DType dtype, int64_t bytes, Clock::time_point issued,
                          WorkPtr inner) {
  OpRecord r;
  copyName(r.group, sizeof(r.group), group->name);
  copyName(r.backend, sizeof(r.backend), backend);
  r.rank = group->rank;
  r.worldSize = group->worldSize;
  r.op = ctx.op;
  r.seq = ctx.seq;
  r.dtype = dtype;
  r.bytes = bytes;
  r.numel = bytes / static_cast<int64_t>(elementSize(dtype));
  r.startedUs = wallMicros(Clock::now());
  r.scheduledUs = wallMicros(issued);
  if (!isPointToPoint(ctx.op)) {
    group->lastIssued.store(ctx.seq, std::memory_order_relaxed);
    group->lastIssuedOp.store(static_cast<uint8_t>(ctx.op), std::memory_order_relaxed);
  }
  // A backend that ran the op inline (self; shm when idle) returns it done: nothing is
  // left to watch, so it is recorded as completed and handed back as it is.
  if (inner->isCompleted() && !inner->exception()) {
    r.state = OpState::Completed;
    r.endedUs = r.startedUs;
    recorder_.add(r);
    publishCompletion(group, ctx, backend, bytes, r.scheduledUs, r.endedUs, std::string());
    return inner;
  }
  // The watchdog aborted this very call because a peer was lost: that is its verdict.
  std::string lostVerdict;
  if (inner->isCompleted() && group->anyPeerLost.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(group->lostMutex);
    if (group->abortedCallSeq == ctx.seq) lostVerdict = group->abortedCallVerdict;
  }
  const uint64_t id = recorder_.add(r);
  const Millis verdictWait = settings_.heartbeatTimeout + settings_.heartbeatInterval + 4 * settings_.poll +
                             Millis(2000);
  auto work = std::make_shared<SupervisedWork>(ctx, std::move(inner), group, id, issued, bytes, verdictWait);
  work->attachTo(weak_from_this());
  work->backend = backend;
  work->issuedUs = r.scheduledUs;
  if (!lostVerdict.empty()) work->setVerdict(std::make_exception_ptr(PeerLostError(lostVerdict)), lostVerdict);
  std::lock_guard<std::mutex> lock(mutex_);
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
  const int64_t ended = work.endedUs() ? work.endedUs() : wallMicros(Clock::now());
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
  recorder_.finish(work.recordId(), error ? OpState::Failed : OpState::Completed, ended, message);
  publishCompletion(work.group(), work.context(), work.backend, work.bytes(), work.issuedUs, ended, message);
}

// Progress and hooks of a work that ended (any thread; complete() or track()'s inline path).
void Supervisor::publishCompletion(const std::shared_ptr<GroupMonitor>& group, const OpContext& ctx,
                                   const std::string& backend, int64_t bytes, int64_t issuedUs, int64_t endedUs,
                                   const std::string& error) {
  GroupMonitor& g = *group;
  if (error.empty() && !isPointToPoint(ctx.op)) {
    uint64_t seen = g.lastCompleted.load(std::memory_order_relaxed);
    while (seen < ctx.seq && !g.lastCompleted.compare_exchange_weak(seen, ctx.seq, std::memory_order_relaxed)) {
    }
  }
  if (!hasHooks_.load(std::memory_order_acquire)) return;
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
  {
    std::lock_guard<std::mutex> lock(hookMutex_);
    // Bounded: hooks slower than the ops they watch lose events, and are told so.
    if (hookQueue_.size() >= kMaxQueuedHookEvents) {
      if (droppedHookEvents_++ % kMaxQueuedHookEvents == 0)
        logger_->warn("[group " + g.name + " rank " + std::to_string(g.rank) + "] completion hooks are " +
                      std::to_string(kMaxQueuedHookEvents) + " events behind; " + std::to_string(droppedHookEvents_) +
                      " dropped so far (" + opName(ctx.op) + " seq " + std::to_string(ctx.seq) +
                      " among them). Next: make the hooks cheaper, or hand their work to a thread of yours");
      return;
    }
    hookQueue_.emplace_back(group, std::move(ev));
  }
  hookWake_.notify_one();
}

int Supervisor::addHook(const GroupMonitor* group, CompletionHook hook) {
  std::lock_guard<std::mutex> lock(hookMutex_);
  const int id = nextHook_++;
  hooks_[id] = {group, std::move(hook)};
  hasHooks_.store(true, std::memory_order_release);
  return id;
}

void Supervisor::removeHook(int id) {
  std::lock_guard<std::mutex> lock(hookMutex_);
  hooks_.erase(id);
  hasHooks_.store(!hooks_.empty(), std::memory_order_release);
}

void Supervisor::hookLoop() {
  std::unique_lock<std::mutex> lock(hookMutex_);
  for (;;) {
    hookWake_.wait(lock, [&] { return !hookQueue_.empty() || hookStopping_; });
    if (hookQueue_.empty()) return;
    {
      auto [group, ev] = std::move(hookQueue_.front());
      hookQueue_.pop_front();
      std::vector<std::pair<int, CompletionHook>> hooks;  // a hook may add or remove hooks
      for (const auto& [id, entry] : hooks_)
        if (entry.first == group.get()) hooks.emplace_back(id, entry.second);
      lock.unlock();
      for (auto& [id, hook] : hooks) {
        std::string problem;
        try {
          hook(ev);
        } catch (const std::exception& e) {
          problem = e.what();
        } catch (...) {
          problem = "an exception that is not a std::exception";
        }
        if (!problem.empty())
          logger_->error("[group " + ev.group + " rank " + std::to_string(ev.rank) + "] completion hook " +
                         std::to_string(id) + " threw on " + opName(ev.op) + " seq " + std::to_string(ev.seq) +
                         ": " + problem + "; fix the hook (it stays registered)");
      }
      // The copies (and what the hooks capture, the group perhaps) go before the lock is
      // taken again: their destructors may end a group, which takes the lock.
    }
    if (destroyedOnThisThread) return;  // the last group went with a hook: *this is gone
    lock.lock();
  }
}

nlohmann::json Supervisor::dumpJson(const std::string& reason) {
  // Works a waiter has not looked at yet may have finished: show them as they are.
  std::vector<std::shared_ptr<SupervisedWork>> running;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    running = inflight_;
  }
  for (auto& w : running)  // outside mutex_, as in pollOnce
    if (!w->finalized() && w->inner()->isCompleted()) w->noteEnd();
  nlohmann::json j;
  j["version"] = 1;
  j["reason"] = reason;
  j["pid"] = ::getpid();
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  j["host"] = host;
  j["time_us"] = wallMicros();
  j["entries_capacity"] = recorder_.capacity();
  int processRank = -1;
  nlohmann::json groupsJson = nlohmann::json::array();
  for (auto& g : groups()) {
    if (processRank < 0) processRank = g->globalRank(g->rank);
    nlohmann::json lost = nlohmann::json::object();
    nlohmann::json left = nlohmann::json::array();
    {
      std::lock_guard<std::mutex> lock(g->lostMutex);
      for (auto& [peer, why] : g->lostPeers) lost[std::to_string(peer)] = why;
      for (int peer : g->leftPeers) left.push_back(peer);
    }
    groupsJson.push_back({{"name", g->name},
                          {"rank", g->rank},
                          {"world_size", g->worldSize},
                          {"global_ranks", g->globalRanks},
                          {"last_issued", g->lastIssued.load()},
                          {"last_completed", g->lastCompleted.load()},
                          {"lost_peers", lost},
                          {"left_peers", left}});
  }
  j["rank"] = processRank;
  j["groups"] = groupsJson;
  nlohmann::json entries = nlohmann::json::array();
  for (const auto& r : recorder_.snapshot()) entries.push_back(recordToJson(r));
  j["entries"] = entries;
  return j;
}

std::string Supervisor::dump(const std::string& reason) {
  std::lock_guard<std::mutex> lock(dumpMutex_);
  try {
    const nlohmann::json j = dumpJson(reason);
    // replace: an error message from a backend need not be valid UTF-8.
    const std::string text = j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace);
    const int rank = j.value("rank", -1);
    std::filesystem::create_directories(settings_.dumpDir);
    const std::string path = settings_.dumpDir + "/rank" + std::to_string(rank) + ".json";
    const std::string tmp = path + ".tmp" + std::to_string(::getpid());
    {
      std::ofstream out(tmp);
      out << text << "\n";
      if (!out) throw std::runtime_error("write failed");
    }
    std::filesystem::rename(tmp, path);  // readers never see half a file
    logger_->warn("flight recorder dumped to " + path + " (" + reason + ")");
    return path;
  } catch (const std::exception& e) {
    logger_->error("could not write the flight recorder dump (" + reason + ") to " + settings_.dumpDir + ": " +
                   e.what() + "; set supervisor.flight_recorder.dump_dir to a writable directory");
    return {};
  }
}

}  // namespace commhost::supervisor

namespace commhost {

std::string dumpFlightRecorder(const std::string& reason) {
  auto sup = supervisor::Supervisor::current();
  return sup ? sup->dump(reason) : std::string();
}

void requestTraceDump(Store& jobStore, const std::string& reason) {
  jobStore.append(supervisor::kTraceDumpReasons, toBytes(reason + "\n"));
  jobStore.add(supervisor::kTraceDumpCount, 1);
}

}  // namespace commhost
