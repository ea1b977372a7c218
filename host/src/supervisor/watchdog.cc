// The watchdog thread: completes works, turns deadlines passed and peers lost into
// incidents (desync report, dumps from every rank, the verdict), and applies on_error.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <set>

#include "commhost/errors.h"
#include "commhost/option_schema.h"
#include "desync.h"
#include "supervisor.h"

namespace commhost::supervisor {
namespace {

std::string describe(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "unknown error";
  }
}

ErrorCode codeOf(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const Error& ex) {
    return ex.code();
  } catch (...) {
    return ErrorCode::Backend;
  }
}

// The group rank a backend's error names in its ErrorContext prefix
// ("[group g rank r] op seq s (peer N): ..."), or -1: the backend's own evidence of
// which peer died (e.g. gloo maps the dropped connection to its rank).
int peerNamedBy(std::exception_ptr e) {
  const std::string what = describe(e);
  const size_t prefixEnd = what.find(": ");
  const size_t at = what.find(" (peer ");
  if (at == std::string::npos || prefixEnd == std::string::npos || at > prefixEnd) return -1;
  try {
    return std::stoi(what.substr(at + 7));
  } catch (const std::exception&) {
    return -1;
  }
}

std::string formatBytes(int64_t b) {
  char buf[32];
  if (b >= (1 << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", b / 1048576.0);
  else if (b >= 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  else std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(b));
  return buf;
}

}  // namespace

void Supervisor::logUnexpected(const char* thread, std::exception_ptr error) {
  logger_->error(std::string("the supervisor's ") + thread + " thread caught an unexpected error: " +
                 describe(error) + "; it goes on. Please report this with the log");
}

void Supervisor::watchdogLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, settings_.poll, [&] { return stopping_; });
    if (stopping_) break;
    lock.unlock();
    try {
      pollOnce();
    } catch (...) {
      logUnexpected("watchdog", std::current_exception());  // and go on watching
    }
    watchdogTicks_.fetch_add(1, std::memory_order_relaxed);
    lock.lock();
  }
}

void Supervisor::pollOnce() {
  const auto now = Clock::now();
  std::vector<std::shared_ptr<SupervisedWork>> running;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = 0; i < inflight_.size();) {
      if (inflight_[i]->finalized()) {
        inflight_[i] = std::move(inflight_.back());
        inflight_.pop_back();
        continue;
      }
      running.push_back(inflight_[i]);
      ++i;
    }
  }
  // Backends are asked outside mutex_: a blocked isCompleted() must stall only this
  // thread (the heartbeat reports that), never the callers' track() or the heartbeat.
  std::vector<std::shared_ptr<SupervisedWork>> attention;
  for (auto& w : running)
    if (w->inner()->isCompleted() || now >= w->deadline() || w->group()->anyPeerLost.load(std::memory_order_acquire))
      attention.push_back(std::move(w));
  for (auto& w : attention) {
    if (!w->inner()->isCompleted()) {
      raiseIncident(*w, nullptr);  // deadline passed, or a peer of its group is lost
      continue;
    }
    w->noteEnd();
    const std::exception_ptr error = w->inner()->exception();
    const ErrorCode code = error ? codeOf(error) : ErrorCode::Backend;
    if (!error || w->hasVerdict()) {
      complete(*w);
    } else if (code == ErrorCode::Timeout) {
      raiseIncident(*w, error);
    } else if (code == ErrorCode::PeerLost) {
      // A backend that names the dead peer is believed at once: the peer is marked
      // lost, so the group's other works (waiting on live ranks) fail now too. One that
      // sees only a connection drop waits for the heartbeat to name the peer, or gives
      // up after one heartbeat timeout.
      const int named = peerNamedBy(error);
      if (named >= 0 && named < w->group()->worldSize && named != w->group()->rank)
        w->group()->markLost(named, "the backend saw its connection to this rank drop");
      if (w->peerErrorSeen == Clock::time_point{}) w->peerErrorSeen = now;
      if (w->group()->anyPeerLost.load(std::memory_order_acquire) ||
          w->group()->anyPeerLeft.load(std::memory_order_acquire) ||
          now - w->peerErrorSeen > settings_.heartbeatTimeout + settings_.heartbeatInterval)
        raiseIncident(*w, error);
    } else {
      // One dump a second at most: a backend failing every op must not keep this thread
      // writing files (the heartbeat would take that for a stalled watchdog).
      if (code != ErrorCode::Aborted && now - lastErrorDump_ >= Millis(1000)) {
        lastErrorDump_ = now;
        dump("error in " + std::string(opName(w->op())) + " seq " + std::to_string(w->seq()) + ": " +
             describe(error));
      }
      complete(*w);
    }
  }
}

// Runs on the watchdog thread. The first incident of a group in a while asks every rank
// to dump and publish its progress, then reads the progress for the desync report.
void Supervisor::raiseIncident(SupervisedWork& w, std::exception_ptr cause) {
  GroupMonitor& g = *w.group();
  const OpContext& ctx = w.context();
  const auto elapsed = std::chrono::duration_cast<Millis>(Clock::now() - w.issued());
  std::string lost;
  {
    std::lock_guard<std::mutex> lock(g.lostMutex);
    for (const auto& [peer, why] : g.lostPeers)
      lost += (lost.empty() ? "" : "; ") +
              (peer >= 0 ? "peer " + std::to_string(g.globalRank(peer)) + " lost: " : std::string()) + why;
    for (int peer : g.leftPeers)
      lost += (lost.empty() ? "" : "; ") + std::string("peer ") + std::to_string(g.globalRank(peer)) +
              " left: it destroyed its side of the group";
  }
  const bool peerLost = !lost.empty();
  ErrorContext where{g.name, g.rank, opName(ctx.op), ctx.seq};
  std::string what = std::string(peerLost ? "" : "did not complete: ") + (peerLost ? lost + ". " : "") +
                     formatBytes(w.bytes()) + ", issued " + formatDuration(elapsed) + " ago, timeout " +
                     formatDuration(ctx.timeout) + (cause ? " (backend said: " + describe(cause) + ")" : "") + ". ";

  // Works of one group failing together (one hang, one lost peer) share one incident.
  const bool fresh = g.lastIncident.empty() || Clock::now() - g.lastIncidentAt > settings_.heartbeatInterval +
                                                                                   settings_.poll * 2;
  if (fresh && isPointToPoint(ctx.op)) {
    dump("incident: " + std::string(opName(ctx.op)) + " seq " + std::to_string(ctx.seq));
  } else if (fresh) {
    ++g.incidentsRaised;
    g.lastIncidentAt = Clock::now();
    std::string report;
    try {
      if (g.storeLost.load(std::memory_order_acquire)) throw StoreError("it stopped answering earlier");
      const int64_t raisedAtMs = std::chrono::duration_cast<Millis>(
                                     std::chrono::system_clock::now().time_since_epoch()).count();
      const std::string line = "incident|" + std::to_string(g.rank) + "|" + std::to_string(g.incidentsRaised) + "|" +
                               opName(ctx.op) + " seq " + std::to_string(ctx.seq) + "|" + std::to_string(raisedAtMs);
      g.store->set(ackKey(g.rank, g.incidentsRaised), Bytes{});  // before anyone can ack it
      g.store->append(kIncidentLog, toBytes(line + "\n"));
      g.store->add(kIncidentCount, 1);
      publishProgress(g);
      dump("incident: " + std::string(opName(ctx.op)) + " seq " + std::to_string(ctx.seq));
      // Peers dump within a heartbeat tick; give them up to a second before the
      // verdict lets this process exit (and a launcher stop theirs).
      std::set<int> expected;
      for (int r = 0; r < g.worldSize; ++r)
        if (r != g.rank) expected.insert(r);
      {
        std::lock_guard<std::mutex> lock(g.lostMutex);
        for (const auto& lost : g.lostPeers) expected.erase(lost.first);
        for (int left : g.leftPeers) expected.erase(left);  // no longer there to dump
      }
      const auto until = Clock::now() + Millis(1000);
      const int64_t window = (settings_.heartbeatInterval + Millis(2000)).count();
      while (Clock::now() < until) {
        // Ranks that raise the same incident at once wait on each other: answer theirs.
        answerIncidents(g, /*dumpFirst=*/false);
        for (int r : peersThatDumped(g, g.incidentsRaised, raisedAtMs, window)) expected.erase(r);
        if (expected.empty()) break;
        std::this_thread::sleep_for(Millis(20));
      }
      report = desyncReport(g, ctx.seq, ctx.op);
    } catch (const std::exception& e) {
      if (!g.storeLost.exchange(true))
        logger_->error(where.format() + "the store failed while reporting this incident (" + e.what() +
                       "); the supervisor stops using it, so no more heartbeats or desync reports for this "
                       "group. Next: check the rank serving the store (usually 0)");
      report = "No desync report: the store did not answer (" + std::string(e.what()) + "). ";
      dump("incident: " + std::string(opName(ctx.op)) + " seq " + std::to_string(ctx.seq));
    }
    g.lastIncident = report + "Flight recorder dumps are in " + settings_.dumpDir + " (one per rank); run `commhost "
                     "trace analyze " + settings_.dumpDir + "` for the first collective where ranks diverge.";
  }
  if (!isPointToPoint(ctx.op)) what += g.lastIncident;
  const std::string hint = peerLost ? "find out why that process died (its log, the launcher's summary, dmesg for the "
                                      "OOM killer); restart the job or re-create the group without it"
                                    : "look at the ranks named above; raise group.timeout if the op is just slow";
  const std::string message = where.format() + what + " Next: " + hint + ".";
  if (!cause && w.inner()->isCompleted() && !w.inner()->exception()) {
    // It finished during the handshake above: no verdict, and no on_error for a success.
    logger_->warn(where.format() + "completed after all, " + formatDuration(elapsed) + " after it was issued");
    complete(w);
    return;
  }
  std::exception_ptr verdict = peerLost ? std::make_exception_ptr(PeerLostError(message))
                                        : std::make_exception_ptr(TimeoutError(message));
  logger_->error(message);
  w.setVerdict(verdict, message);
  complete(w);
  // A point-to-point op involves two ranks only: it fails alone, the group goes on.
  if (!isPointToPoint(ctx.op)) applyOnError(g, message);
}

void Supervisor::applyOnError(GroupMonitor& g, const std::string& message) {
  switch (g.onError) {
    case OnError::Report:
      return;
    case OnError::Abort:
      if (g.abortGroup) g.abortGroup(message);
      return;
    case OnError::Teardown:
      logger_->error("supervisor.on_error is teardown: ending the process with status " +
                     std::to_string(kTeardownExitStatus));
      Logger::flushAll();
      std::fflush(nullptr);
      ::_exit(kTeardownExitStatus);
  }
}

}  // namespace commhost::supervisor
