// The heartbeat thread: publishes this rank's heartbeat and progress, notices peers that
// stopped beating, answers dump requests, and checks that the watchdog still advances.
#include <algorithm>

#include "commhost/errors.h"
#include "commhost/option_schema.h"
#include "desync.h"
#include "messages.h"
#include "supervisor.h"

namespace commhost::supervisor {
namespace {

// An incident keeps the watchdog busy up to a second waiting for peers' dumps, plus the
// store round trips of the desync report: not a stall.
constexpr Millis kLongestIncident{5000};

// Each rank watches the next two ranks (ring order): every rank is watched by two
// others, and the store serves O(world) reads per interval, not O(world^2).
std::vector<int> peersToWatch(int rank, int worldSize) {
  std::vector<int> out;
  for (int d = 1; d <= 2 && d < worldSize; ++d) {
    const int peer = (rank + d) % worldSize;
    if (peer != rank && (out.empty() || out[0] != peer)) out.push_back(peer);
  }
  return out;
}

}  // namespace

void Supervisor::heartbeatLoop() {
  const Millis tick = std::min(settings_.heartbeatInterval, Millis(100));
  uint64_t lastTicks = watchdogTicks_.load();
  auto lastAdvance = Clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    const auto asleep = Clock::now();
    wake_.wait_for(lock, tick, [&] { return stopping_; });
    if (stopping_) break;
    lock.unlock();
    // A wake-up seconds late means the whole process was not scheduled: the watchdog
    // could not advance either, and no backend call is to blame.
    if (noteAlive(asleep, tick)) lastAdvance = Clock::now();
    try {
      heartbeatTick(lastTicks, lastAdvance);
    } catch (...) {
      logUnexpected("heartbeat", std::current_exception());  // and go on beating
    }
    lock.lock();
  }
}

bool Supervisor::noteAlive(Clock::time_point asleep, Millis expected) {
  // A thread that slept `expected` but woke seconds later was not run at all (SIGSTOP, a
  // debugger, a suspended VM, a starved host): measured on the sleep alone, so a slow
  // store call or backend poll in between is never taken for it.
  const auto now = Clock::now();
  const auto late = std::chrono::duration_cast<Millis>(now - asleep - expected);
  const Millis threshold = std::max(Millis(2000), settings_.poll * 20);
  if (late <= threshold) return false;
  // The heartbeat and watchdog both wake late after one pause: the first says so, before
  // any verdict it gives, so that the log explains the verdict.
  const int64_t nowNs = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  int64_t reported = lastPauseReport_.load(std::memory_order_relaxed);
  if (nowNs - reported < std::chrono::duration_cast<std::chrono::nanoseconds>(threshold).count() ||
      !lastPauseReport_.compare_exchange_strong(reported, nowNs))
    return true;
  logger_->warn("this process was not scheduled for " + formatDuration(late) +
                " (stopped by a signal or a debugger, or the machine was suspended or overloaded): its "
                "heartbeat and watchdog stood still meanwhile, so its peers may have declared it lost and "
                "works in flight may have passed their deadline. Next: if nobody stopped it on purpose, "
                "look for what starves this host (load, swap, the VM's steal time)");
  return true;
}

void Supervisor::heartbeatTick(uint64_t& lastTicks, Clock::time_point& lastAdvance) {
  const auto now = Clock::now();
  refreshWallClockOffset();  // follows NTP's steps of the wall clock
  if (takeSigusr1() || signalDump_.exchange(false)) dump("SIGUSR1");

  const uint64_t ticks = watchdogTicks_.load(std::memory_order_relaxed);
  if (ticks != lastTicks) {
    lastTicks = ticks;
    lastAdvance = now;
  } else if (now - lastAdvance > std::max({settings_.heartbeatTimeout, settings_.poll * 20, kLongestIncident}) &&
             !watchdogStallReported_) {
    watchdogStallReported_ = true;
    reportWatchdogStall(std::chrono::duration_cast<Millis>(now - lastAdvance));
  }

  const auto groups = this->groups();
  bool traceChecked = false;
  for (const auto& g : groups) {
    if (g->storeLost.load(std::memory_order_acquire)) continue;
    try {
      if (!traceChecked && g->jobStore) {
        traceChecked = true;
        const int64_t requests = g->jobStore->add(kTraceDumpCount, 0);
        if (requests > seenTraceDump_) {
          if (seenTraceDump_ >= 0) {
            // The last reason given (requestTraceDump appends one line per request).
            std::string reasons = toString(g->jobStore->get(kTraceDumpReasons));
            while (!reasons.empty() && reasons.back() == '\n') reasons.pop_back();
            dump("commhost trace dump: " + reasons.substr(reasons.rfind('\n') + 1));
          }
          seenTraceDump_ = requests;
        }
      }
      answerIncidents(*g);
      if (now >= g->nextBeat) {
        g->nextBeat = now + settings_.heartbeatInterval;
        beat(*g, now);
      }
    } catch (const std::exception& e) {
      // The store lives in rank 0's process (or a standalone server): losing it means
      // losing the job's control plane.
      g->storeLost.store(true, std::memory_order_release);
      g->markLost(-1, std::string("the store stopped answering heartbeats (") + e.what() +
                          "); the rank serving it (usually 0) may have died");
    }
  }
}

void Supervisor::beat(GroupMonitor& g, Clock::time_point now) {
  if (g.watched.empty() && g.worldSize > 1) {
    g.watched = peersToWatch(g.rank, g.worldSize);
    g.watchedBeat.assign(g.watched.size(), -1);
    g.watchedSince.assign(g.watched.size(), now);
    g.watchedLeft.assign(g.watched.size(), false);
  }
  g.store->add(heartbeatKey(g.rank), 1);
  publishProgress(g);
  for (size_t i = 0; i < g.watched.size(); ++i) {
    const int peer = g.watched[i];
    const int64_t beatNow = g.store->add(heartbeatKey(peer), 0);
    if (beatNow != g.watchedBeat[i]) {
      g.watchedBeat[i] = beatNow;
      g.watchedSince[i] = now;
      continue;
    }
    const auto silent = std::chrono::duration_cast<Millis>(now - g.watchedSince[i]);
    if (silent <= settings_.heartbeatTimeout || g.watchedLeft[i]) continue;
    {
      std::lock_guard<std::mutex> lock(g.lostMutex);
      if (g.lostPeers.count(peer)) continue;
    }
    if (g.store->check({leftKey(peer)})) {  // it destroyed the group: done, not lost
      g.watchedLeft[i] = true;
      std::lock_guard<std::mutex> lock(g.lostMutex);
      g.leftPeers.insert(peer);
      g.anyPeerLeft.store(true, std::memory_order_release);
      continue;
    }
    const std::string why = "no heartbeat for " + formatDuration(silent) + " (heartbeat.timeout " +
                            formatDuration(settings_.heartbeatTimeout) + "), noticed by rank " +
                            std::to_string(g.globalRank(g.rank));
    logger_->error("[group " + g.name + " rank " + std::to_string(g.rank) + "] peer " +
                   std::to_string(g.globalRank(peer)) + " lost: " + why);
    g.markLost(peer, why);
    // Tell the ranks that do not watch this peer.
    if (!appendToIncidentLog(g, {wire::encode(wire::PeerLost{g.rank, peer, why})})) noteIncidentLogFull(g);
  }
}

// Another rank raised an incident: publish progress for its report, dump, acknowledge.
void Supervisor::answerIncidents(GroupMonitor& g, bool dumpFirst) {
  std::lock_guard<std::mutex> lock(g.incidentMutex);
  const int64_t count = g.store->add(kIncidentCount, 0);
  if (count <= g.seenIncident) return;
  const auto lines = wire::splitLines(toString(g.store->get(kIncidentLog)));
  std::vector<std::string> acks;
  for (int64_t n = g.seenIncident + 1; n <= static_cast<int64_t>(lines.size()); ++n) {
    g.seenIncident = n;
    const auto decoded = wire::decodeLogLine(lines[n - 1]);
    if (!decoded) {
      logger_->warn(ErrorContext{g.name, g.rank}.format() + "skipped line " + std::to_string(n) +
                    " of the incident log: " + decoded.error + ". Next: run every rank with the same commhost "
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
  publishProgress(g);
  if (dumpFirst) dump("incident raised by another rank of group " + g.name);
  for (const auto& key : acks) g.store->append(key, toBytes(wire::encodeAck(g.rank)));
}

void Supervisor::noteIncidentLogFull(GroupMonitor& g) {
  if (g.incidentLogFull.exchange(true)) return;
  logger_->error(ErrorContext{g.name, g.rank}.format() + "the group's incident log in the store is full (" +
                 std::to_string(kMaxIncidentLines) + " lines): from now on this rank's incidents and lost "
                 "peers are handled here only, without asking the other ranks to dump. Next: this group has "
                 "failed thousands of times; re-create it (a new group starts a new log)");
}

void Supervisor::reportWatchdogStall(Millis stalled) {
  std::shared_ptr<SupervisedWork> oldest;  // the likeliest to be the one asked
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& w : inflight_)
      if (!w->finalized() && (!oldest || w->issued() < oldest->issued())) oldest = w;
  }
  std::string suspect;
  if (oldest) {
    const GroupMonitor& g = *oldest->group();
    suspect = " The oldest work in flight is [group " + g.name + " rank " + std::to_string(g.rank) + "] " +
              opName(oldest->context().op) + " seq " + std::to_string(oldest->context().seq) + " on backend " +
              oldest->backend + ".";
  }
  const std::string message = "the supervisor's watchdog has not advanced for " + formatDuration(stalled) +
                              ": a backend call it made (isCompleted) is blocked. Works are no longer timed out." +
                              suspect + " Next: report the backend's blocking call to its author";
  logger_->error(message);
  dump("watchdog stalled");
  for (const auto& g : groups()) applyOnError(*g, message);
}

}  // namespace commhost::supervisor
