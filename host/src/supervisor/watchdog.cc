// SPDX-License-Identifier: Apache-2.0
#include "watchdog.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <set>

#include "commhost/errors.h"
#include "commhost/sdk/launch_report.h"
#include "commhost/sdk/option_schema.h"
#include "desync.h"
#include "heartbeat.h"
#include "incident_channel.h"
#include "messages.h"
#include "supervisor.h"

namespace commhost::supervisor {
namespace {

std::string formatBytes(int64_t b) {
  char buf[32];
  if (b >= (1 << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", b / 1048576.0);
  else if (b >= 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  else std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(b));
  return buf;
}

}  // namespace

Watchdog::Watchdog(Supervisor& sup)
    : sup_(sup),
      ticker_(sup.sharedClock()),
      sigterm_(sup.settings().reportOnSigterm ? std::make_unique<SigtermWatch>() : nullptr),
      thread_([this] { loop(); }) {}

Watchdog::~Watchdog() {
  ticker_.stop();
  thread_.join();
}

void Watchdog::loop() {
  const Millis poll = sup_.settings().poll;
  for (;;) {
    const auto asleep = ticker_.clock().now();
    if (!ticker_.wait(poll)) break;
    sup_.pauses().noteAlive(asleep, ticker_.clock().now(), poll);  // after a pause, say so before any verdict below
    try {
      pollOnce();
    } catch (...) {
      sup_.logUnexpected("watchdog", std::current_exception());  // and go on watching
    }
    ticks_.fetch_add(1, std::memory_order_relaxed);
    if (sigterm_ && SigtermWatch::pending()) reportSigterm();
  }
}

// A launcher ends the job with SIGTERM when another rank failed (srun --kill-on-bad-exit,
// torchrun, mpirun, commhost run), often before this rank's own verdict: say what each group
// was in and which peers it had lost, so the job's log explains the end on every rank.
void Watchdog::reportSigterm() {
  const auto now = ticker_.clock().now();
  const auto running = sup_.running();
  std::vector<std::string> lines;
  for (const auto& g : sup_.groups()) {
    const GroupOpNow in = groupOpNow(*g, running);
    const std::shared_ptr<SupervisedWork>& oldest = in.oldest;
    const GroupMonitor::IssuedOp inCall = in.inCall;
    std::string line;
    if (oldest) {
      line = ErrorContext::of(oldest->context()).format() + "terminated by SIGTERM while in it (in flight " +
             formatDuration(std::chrono::duration_cast<Millis>(now - oldest->issued())) + ")";
    } else if (inCall.seq != 0) {
      line = ErrorContext{g->name, g->rank, opName(inCall.op), inCall.seq}.format() +
             "terminated by SIGTERM while in it (waiting inside the backend call, which runs it on the caller)";
    } else {
      line = ErrorContext{g->name, g->rank}.format() + "terminated by SIGTERM with no collective in flight";
    }
    if (g->anyPeerLost.load(std::memory_order_acquire)) line += "; " + g->lostText();
    lines.push_back(std::move(line));
  }
  const std::string dumped = sup_.dump("SIGTERM");
  for (const auto& line : lines)
    sup_.logger().error(line + (dumped.empty() ? "" : "; flight recorder dumped to " + dumped) +
                        ". Next: a launcher sends SIGTERM when it ends the job (another rank failed, a time limit, "
                        "scancel): the rank that failed first names the cause in its own report");
  SigtermWatch::endProcess();
}

void Watchdog::failBackendCall(GroupMonitor& g) {
  const auto [seq, op] = g.callInBackend();
  const uint64_t seenBefore = g.watchdog.callSeenInBackend;
  g.watchdog.callSeenInBackend = seq;
  // Only a call still inside its backend a poll later is waiting there; one that merely
  // hands its op to the backend's threads (gloo) returns a work the incident fails.
  if (seq == 0 || seq != seenBefore || !g.anyPeerLost.load(std::memory_order_acquire)) return;
  {
    MutexLock lock(&g.lostMutex);
    if (g.abortedCallSeq == seq) return;  // done already
  }
  const ErrorContext where{g.name, g.rank, opName(op), seq};
  const std::string message =
      where.format() + g.lostText() +
      ". This rank was waiting for it inside the backend call (the op ran on the "
      "calling thread), so the group's backends are aborted to end the wait. Next: find out why that process "
      "stopped or died (its log, the launcher's summary, dmesg for the OOM killer); restart the job or re-create "
      "the group without it.";
  {
    MutexLock lock(&g.lostMutex);
    g.abortedCallSeq = seq;
    g.abortedCallVerdict = message;
  }
  sup_.logger().error(message);
  if (g.abortGroup) g.abortGroup(message);
}

void Watchdog::pollOnce() {
  const Settings& settings = sup_.settings();
  const auto now = ticker_.clock().now();
  for (const auto& g : sup_.groups()) failBackendCall(*g);
  std::vector<std::shared_ptr<SupervisedWork>> running = sup_.running();
  // Backends are asked outside the supervisor's mutex: a blocked isCompleted() must stall only this
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
    const ErrorCode code = error ? factsOf(error).code : ErrorCode::Backend;
    if (!error || w->hasVerdict()) {
      sup_.complete(*w);
    } else if (code == ErrorCode::Timeout) {
      raiseIncident(*w, error);
    } else if (code == ErrorCode::PeerLost) {
      // A backend that names the peer (shm: its process exited) is evidence enough:
      // the incident is raised at once. Others see a connection drop, not which rank
      // died: wait for the heartbeat to name the peer, or give up after one heartbeat
      // timeout.
      GroupMonitor& g = *w->group();
      const int peer = factsOf(error).where.peer;  // the peer the backend named, if any
      if (peer >= 0 && peer < g.worldSize && peer != g.rank)
        g.markLost(peer, "backend " + w->backend + " of rank " + std::to_string(g.globalRank(g.rank)) + " saw it go");
      if (w->peerErrorSeen == TimePoint{}) w->peerErrorSeen = now;
      if (w->group()->anyPeerLost.load(std::memory_order_acquire) ||
          w->group()->anyPeerLeft.load(std::memory_order_acquire) ||
          now - w->peerErrorSeen > settings.heartbeatTimeout + settings.heartbeatInterval)
        raiseIncident(*w, error);
    } else {
      // One dump a second at most: a backend failing every op must not keep this thread
      // writing files (the heartbeat would take that for a stalled watchdog).
      if (code != ErrorCode::Aborted && now - lastErrorDump_ >= Millis(1000)) {
        lastErrorDump_ = now;
        sup_.dump("error in " + std::string(opName(w->op())) + " seq " + std::to_string(w->seq()) + ": " +
                  factsOf(error).what);
      }
      sup_.complete(*w);
    }
  }
}

// Runs on the watchdog thread. The first incident of a group in a while asks every rank
// to dump and publish its progress, then reads the progress for the desync report.
void Watchdog::raiseIncident(SupervisedWork& w, const std::exception_ptr& cause) {
  const Settings& settings = sup_.settings();
  Clock& clock = ticker_.clock();
  GroupMonitor& g = *w.group();
  GroupMonitor::WatchdogView& mine = g.watchdog;
  const OpContext& ctx = w.context();
  const auto elapsed = std::chrono::duration_cast<Millis>(clock.now() - w.issued());
  const std::string lost = g.lostText();
  const bool peerLost = !lost.empty();
  const ErrorContext where{g.name, g.rank, opName(ctx.op), ctx.seq};
  std::string what = std::string(peerLost ? "" : "did not complete: ") + (peerLost ? lost + ". " : "") +
                     formatBytes(w.bytes()) + ", issued " + formatDuration(elapsed) + " ago, timeout " +
                     formatDuration(ctx.timeout) + (cause ? " (backend said: " + factsOf(cause).what + ")" : "") + ". ";

  // Works of one group failing together (one hang, one lost peer) share one incident.
  const bool fresh = mine.lastIncident.empty() ||
                     clock.now() - mine.lastIncidentAt > settings.heartbeatInterval + settings.poll * 2;
  if (fresh && isPointToPoint(ctx.op)) {
    sup_.dump("incident: " + std::string(opName(ctx.op)) + " seq " + std::to_string(ctx.seq));
  } else if (fresh) {
    ++mine.incidentsRaised;
    mine.lastIncidentAt = clock.now();
    const std::string report = publishIncident(g, ctx);
    mine.lastIncident = report + "Flight recorder dumps are in " + sup_.dumpDir() +
                        " (one per rank); run `commhost "
                        "trace analyze " +
                        sup_.dumpDir() + "` for the first collective where ranks diverge.";
    sup_.events().add("incident", g.name,
                      where.format() + (peerLost ? lost : "did not complete within " + formatDuration(ctx.timeout)));
  }
  if (!isPointToPoint(ctx.op)) what += mine.lastIncident;
  const std::string hint =
      !peerLost ? "look at the ranks named above; raise group.timeout if the op is just slow"
      : g.shrinkOnPeerLoss
          ? "supervisor.on_peer_loss is shrink: call shrink() on the group (every survivor does) and re-run the "
            "step on the ranks left"
          : "find out why that process died (its log, the launcher's summary, dmesg for the OOM killer); restart the "
            "job or re-create the group without it";
  const std::string message = where.format() + what + " Next: " + hint + ".";
  if (!cause && w.inner()->isCompleted() && !w.inner()->exception()) {
    // It finished during the handshake above: no verdict, and no on_error for a success.
    sup_.logger().warn(where.format() + "completed after all, " + formatDuration(elapsed) + " after it was issued");
    sup_.complete(w);
    return;
  }
  judge(w, where, message, peerLost);
}

std::string Watchdog::publishIncident(GroupMonitor& g, const OpContext& ctx) {
  GroupMonitor::WatchdogView& mine = g.watchdog;
  const std::string incident = "incident: " + std::string(opName(ctx.op)) + " seq " + std::to_string(ctx.seq);
  try {
    if (g.storeLost.load(std::memory_order_acquire)) throw StoreError("it stopped answering earlier");
    const int64_t raisedAtMs = std::chrono::duration_cast<Millis>(std::chrono::system_clock::now().time_since_epoch())
                                   .count();
    const std::string line = wire::encode(wire::Incident{
        g.rank, mine.incidentsRaised, raisedAtMs, std::string(opName(ctx.op)) + " seq " + std::to_string(ctx.seq)});
    g.store->set(ackKey(g.rank, mine.incidentsRaised), Bytes{});  // before anyone can ack it
    // The peers this rank knows are lost (its backend named one), first: a rank whose
    // own backend saw only a dropped connection then fails at once too, instead of
    // waiting for its heartbeat, by which time the store may be gone with rank 0.
    std::vector<std::string> lines;
    for (const auto& [peer, why] : g.lost())
      if (peer >= 0) lines.push_back(wire::encode(wire::PeerLost{g.rank, peer, why}));
    lines.push_back(line);
    const bool published = appendToIncidentLog(g, lines);
    if (!published) noteIncidentLogFull(g, sup_.logger());
    publishProgress(g);
    sup_.dump(incident);
    waitForPeerDumps(g, mine.incidentsRaised, raisedAtMs, published, ctx.seq);
    return desyncReport(g, ctx.seq, ctx.op);
  } catch (const std::exception& e) {
    if (!g.storeLost.exchange(true))
      sup_.logger().error(ErrorContext{g.name, g.rank, opName(ctx.op), ctx.seq}.format() +
                          "the store failed while reporting this incident (" + e.what() +
                          "); the supervisor stops using it, so no more heartbeats or desync reports for this "
                          "group. Next: check the rank serving the store (usually 0)");
    sup_.dump(incident);
    return "No desync report: the store did not answer (" + std::string(e.what()) + "). ";
  }
}

void Watchdog::waitForPeerDumps(GroupMonitor& g, int64_t id, int64_t raisedAtMs, bool published, uint64_t seq) {
  // Peers dump within a heartbeat tick; give them up to a second before the verdict lets
  // this process exit (and a launcher stop theirs).
  std::set<int> expected;
  for (int r = 0; r < g.worldSize; ++r)
    if (r != g.rank) expected.insert(r);
  for (const auto& lost : g.lost()) expected.erase(lost.first);
  for (int left : g.left()) expected.erase(left);  // no longer there to dump
  // Real time, whatever the clock: this waits for other processes' store writes.
  // Nobody was asked to dump when the log was full: no wait.
  const auto until = published ? SteadyClock::now() + Millis(1000) : SteadyClock::now();
  const int64_t window = (sup_.settings().heartbeatInterval + Millis(2000)).count();
  // Ranks that raise the same incident at once wait on each other: answer theirs
  // (this rank has just dumped: no second dump).
  const auto heard = [&] {
    g.incidents.answer(g, sup_.logger(), [&] { publishProgress(g); });
    return peersThatDumped(g, id, raisedAtMs, window);
  };
  while (SteadyClock::now() < until) {
    for (int r : heard()) expected.erase(r);
    if (expected.empty()) return;
    std::this_thread::sleep_for(Millis(20));
  }
  if (published) awaitLateProgress(g, seq, expected, sup_.settings().heartbeatInterval + Millis(1000), heard);
}

void Watchdog::judge(SupervisedWork& w, ErrorContext where, const std::string& message, bool peerLost) {
  GroupMonitor& g = *w.group();
  if (peerLost) {
    const auto lostPeers = g.lost();
    if (lostPeers.size() == 1) where.peer = lostPeers.begin()->first;  // the one peer to name
  }
  std::exception_ptr verdict = peerLost ? std::make_exception_ptr(PeerLostError(message, where))
                                        : std::make_exception_ptr(TimeoutError(message, where));
  sup_.logger().error(message);
  w.setVerdict(verdict, message);
  sup_.complete(w);
  // A point-to-point op involves two ranks only: it fails alone, the group goes on.
  if (isPointToPoint(w.context().op)) return;
  if (peerLost && g.shrinkOnPeerLoss) {
    if (g.abortGroup) g.abortGroup(message);  // the process lives on, to shrink the group
    return;
  }
  applyOnError(g, message, sup_.logger(), peerLost ? ErrorCode::PeerLost : ErrorCode::Timeout);
}

void applyOnError(GroupMonitor& g, const std::string& message, Logger& logger, ErrorCode code) {
  if (g.onError == OnError::Report) return;
  // The group ends here (abort) or the process does (teardown): the launcher hears why.
  if (const auto& report = launchReporter())
    report({LaunchEvent::Failed, -1, g.name, 0, errorCodeName(code), message, ""});
  switch (g.onError) {
    case OnError::Report: return;
    case OnError::Abort:
      if (g.abortGroup) g.abortGroup(message);
      return;
    case OnError::Teardown:
      logger.error("supervisor.on_error is teardown: ending the process with status " +
                   std::to_string(kTeardownExitStatus));
      Logger::flushAll();
      std::fflush(nullptr);
      ::_exit(kTeardownExitStatus);
  }
}

}  // namespace commhost::supervisor
