// SPDX-License-Identifier: Apache-2.0
// The gloo backend's lifecycle: options, rendezvous, error description, abort, shutdown.
#include <dirent.h>
#include <fcntl.h>
#include <gloo/common/error.h>
#include <gloo/transport/tcp/address.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <set>
#include <thread>
#include <vector>

#include "commhost/errors.h"
#include "commhost/mutex.h"
#include "commhost/sdk/backend_sdk.h"
#include "fatal.h"
#include "gloo_backend.h"
#include "rendezvous.h"

namespace commhost::gloo_backend {

const Capabilities& capabilities() {
  static const Capabilities caps = [] {
    Capabilities c{Capabilities::allOps(),
                   Capabilities::allDTypes(),
                   Capabilities::allReduceOps(),
                   {DeviceType::CPU},
                   {Feature::Split, Feature::MultiProcess, Feature::MultiHost}};
    c.ops.remove(OpType::MonitoredBarrier);  // the host serves it over the store
    return c;
  }();
  return caps;
}

OptionSchema<Options> Options::schema() {
  return OptionSchema<Options>()
      .option("threads", &Options::threads, "1",
              "Worker threads running queued ops; 0 runs each op on the calling thread (lowest latency, no overlap)",
              {0, 64})
      .option("contexts", &Options::contexts, "2",
              "Gloo contexts used in rotation (by seq), so independent ops overlap", {1, 16})
      .option(
          "device", &Options::device, "",
          "Interface name, hostname or address to use; empty: the address this host's name resolves to when it is not "
          "loopback (ranks on several hosts reach each other), else 127.0.0.1")
      .choice("allreduce_algorithm", &Options::algorithm, "auto", "auto: bcube below ring_threshold, ring from there",
              {{"auto", AllreduceAlgorithm::Auto},
               {"ring", AllreduceAlgorithm::Ring},
               {"bcube", AllreduceAlgorithm::Bcube}})
      .size("ring_threshold", &Options::ringThreshold, "256KiB", "Message size from which auto allreduce uses ring")
      .option("worker_spin_us", &Options::workerSpinUs, "-1",
              "Microseconds an idle worker polls for the next op (yielding its CPU) before it sleeps, so back-to-back "
              "small ops skip a wake-up and the CPU does not idle between them; -1: 100 when every rank of the group "
              "that shares this process's CPUs (same host, same affinity) has a CPU of its own, else 0",
              {-1, 100000})
      .choice("thread_placement", &Options::placement, "auto",
              "split: Gloo's transport thread on the upper half of the CPUs this process may run on, the op workers "
              "on the lower half, so that a transport thread never preempts an op thread holding its connection "
              "(Gloo then spins); auto: split when the ranks of the group sharing these CPUs (same host, same "
              "affinity) have fewer than two each; "
              "off: leave it to the scheduler",
              {{"auto", ThreadPlacement::Auto}, {"split", ThreadPlacement::Split}, {"off", ThreadPlacement::Off}})
      .size("inline_max", &Options::inlineMax, "64KiB",
            "Collectives up to this size run on the calling thread when no op is queued or running (no hand-off to "
            "the worker and back, as raw Gloo); such a call returns when the op is done, so it waits for its peers. "
            "0: every op on the worker (issuing never blocks)",
            {0, 1e15})
      .option("timeout", &Options::timeout, "0s", "Rendezvous and default op timeout; 0s: the group's timeout",
              {0, 86400 * 7});
}

std::string Options::checkHere() const { return deviceProblem(device); }

std::unique_ptr<Backend> create(const Options& options, const BackendContext& ctx) {
  // Gloo writes to its sockets without MSG_NOSIGNAL: a peer that dies would kill this
  // process with SIGPIPE instead of failing the op with "connection closed by peer".
  // Ignore the signal unless the application installed its own handler.
  struct sigaction current {};
  if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) ::signal(SIGPIPE, SIG_IGN);
  installFatalHint();
  return std::make_unique<GlooBackend>(options, ctx);
}

namespace {
// When the op the calling thread runs started (set by the work queue's beforeEach hook).
thread_local std::chrono::steady_clock::time_point tlOpStarted;
// Set on the queues' workers as they start: an op described elsewhere ran on its caller.
thread_local bool tlOnWorker = false;
}  // namespace

GlooBackend::GlooBackend(const Options& options, const BackendContext& ctx)
    : ctx_(ctx),
      algorithm_(options.algorithm),
      ringThreshold_(options.ringThreshold),
      inlineMax_(static_cast<size_t>(options.inlineMax)),
      callerRunsAll_(options.threads == 0) {
  auto timeout = options.timeout;
  if (timeout.count() == 0) timeout = ctx.timeout;
  contextTimeout_ = timeout;
  // Worth a store exchange only when a default depends on it.
  const bool needsSharing = options.placement == ThreadPlacement::Auto || options.workerSpinUs < 0;
  const auto cpus = allowedCpus();
  const int sharing = needsSharing ? ranksSharingCpus(ctx, cpus) : ctx.worldSize;
  const std::optional<Placement> placement = plan(options.placement, sharing, cpus);
  if (placement && ctx.logger)
    ctx.logger->info("gloo placement: " + std::to_string(sharing) + " rank(s) of the group share CPU " + cpuList(cpus) +
                     ": " + placement->describe() + " (backends." + ctx.backendName +
                     ".options.thread_placement: off leaves it to the scheduler)");
  auto device = createDevice(options.device, ctx, placement ? placement->transport : std::vector<int>{});
  contexts_ = connectContexts(ctx_, device, options.contexts + 1, timeout, abortRegistry_);
  peerByAddress_ = exchangeEndpoints(ctx_, contexts_, timeout);
  p2p_ = contexts_.back();
  contexts_.pop_back();
  // The queue runs beforeEach, the job and describe on one thread: the op's start time
  // travels from the first to the last in a thread_local. A worker moves to its CPUs as
  // it starts; a caller that runs an op (threads: 0, inline_max) is the application's
  // thread and stays where it is.
  auto hooksPinningTo = [this](std::vector<int> cpus) {
    WorkQueue::Hooks hooks;
    hooks.workerStart = [cpus = std::move(cpus)] {
      tlOnWorker = true;
      if (!cpus.empty()) pinCurrentThread(cpus);  // refused: the transport's warning says so
    };
    hooks.beforeEach = [](const OpContext&) { tlOpStarted = std::chrono::steady_clock::now(); };
    hooks.describe = [this](const OpContext& op, const std::exception_ptr& e) {
      return this->describe(op, e, tlOpStarted, !tlOnWorker);
    };
    return hooks;
  };
  const std::vector<int> workerCpus = placement ? placement->workers : std::vector<int>{};
  const int spinUs = options.workerSpinUs >= 0                                    ? options.workerSpinUs
                     : sharing <= std::max<int>(1, static_cast<int>(cpus.size())) ? 100
                                                                                  : 0;
  queue_ = std::make_unique<WorkQueue>("gloo backend", options.threads, hooksPinningTo(workerCpus),
                                       std::chrono::microseconds(spinUs));
  p2pQueue_ = std::make_unique<WorkQueue>("gloo backend", 1, hooksPinningTo(workerCpus));
  registerForFatalHint(this);
}

namespace {
struct KeptObjects {
  Mutex mutex;
  std::vector<std::shared_ptr<void>> objects GUARDED_BY(mutex);
};
void keepUntilExit(std::shared_ptr<void> object) {
  static auto* kept = new KeptObjects();  // never destroyed, on purpose
  MutexLock lock(&kept->mutex);
  kept->objects.push_back(std::move(object));
}
}  // namespace

// How long the destructor waits, in 10 ms polls, for ops interrupted after an abort to
// come back out of Gloo (they fail within the device thread's next read, well under this).
constexpr int kUnstickPolls = 100;

GlooBackend::~GlooBackend() {
  unregisterForFatalHint(this);
  // An op still inside Gloo after an abort (a peer died) keeps its worker until Gloo's
  // own timeout, group.timeout: joining it would hold a process that already reported
  // for that long, and its peers would see its connections open all the while. Shutting
  // the connections down ends such waits (closing them would not): the workers come back
  // and the queues are joined, which an elastic job, dropping a failed generation's
  // backends while it goes on, needs (else a worker per failure stays behind).
  bool stuck = queue_->stuckAfterAbort() || p2pQueue_->stuckAfterAbort();
  if (stuck) interruptConnections("to end the waits of the ops still inside Gloo after the abort");
  for (int i = 0; stuck && i < kUnstickPolls; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    stuck = queue_->stuckAfterAbort() || p2pQueue_->stuckAfterAbort();
  }
  // Still inside Gloo: leave such a queue behind, with the contexts its ops use (a leak,
  // in a failed job), and close the connections now (the peers' waits fail at once).
  if (stuck) {
    closeConnections();
    // Never destroyed (their workers may still be inside Gloo), but kept reachable, so
    // that a leak checker at exit does not report what was left behind on purpose.
    keepUntilExit(std::shared_ptr<WorkQueue>(queue_.release(), [](WorkQueue*) {}));
    keepUntilExit(std::shared_ptr<WorkQueue>(p2pQueue_.release(), [](WorkQueue*) {}));
    for (const auto& context : contexts_) keepUntilExit(context);
    keepUntilExit(p2p_);
    return;
  }
  queue_.reset();
  p2pQueue_.reset();
}

Call GlooBackend::callFor(const OpContext& op) const {
  return {contexts_[op.seq % contexts_.size()], static_cast<uint32_t>(op.seq), op.timeout, retired_};
}

int GlooBackend::peerNamedIn(const std::string& what) const {
  for (const auto& [address, rank] : peerByAddress_) {
    // "[127.0.0.1]:4000" must not match inside "[127.0.0.1]:40001".
    for (size_t at = what.find(address); at != std::string::npos; at = what.find(address, at + 1)) {
      const size_t end = at + address.size();
      if (end == what.size() || !std::isdigit(static_cast<unsigned char>(what[end]))) return rank;
    }
  }
  return -1;
}

std::string GlooBackend::inFlight() const {
  const int op = lastOp_.load(std::memory_order_relaxed);
  return ErrorContext::of(ctx_).format() + "last op issued: " +
         (op < 0 ? std::string("none")
                 : std::string(opName(static_cast<OpType>(op))) + " seq " +
                       std::to_string(lastSeq_.load(std::memory_order_relaxed)));
}

// Gloo reports a peer that went away and a deadline that passed alike, as IoException
// (EnforceNotMet and the rest are other failures); classify them so callers can catch by
// kind, and name the peer when the text carries its address.
std::exception_ptr GlooBackend::describe(const OpContext& op, const std::exception_ptr& error,
                                         std::chrono::steady_clock::time_point started, bool onCaller) const {
  ErrorContext where{ctx_.groupName, ctx_.rank, opName(op.op), op.seq};
  try {
    std::rethrow_exception(error);
  } catch (const Error&) {
    return error;
  } catch (const ::gloo::IoException& e) {
    const std::string what = std::string("(gloo) ") + e.what();
    if (onCaller && aborted_.load()) {
      // abort() shut the connections down to end this op's wait (see there).
      return std::make_exception_ptr(AbortedError(where.format() + "the gloo backend was aborted (" + abortReason() +
                                                      ") while this op ran on the calling thread: " + what +
                                                      ". Create a new group to continue",
                                                  where));
    }
    // This Gloo (libgloo-dev 0.0~git20220518) has no exception type for a timeout, only
    // IoException with the text "Timed out ...", so the backend goes by the deadlines it
    // set rather than by Gloo's wording: a Gloo wait of an op lasts op.timeout (p2p
    // waits, Call::timeout) or the contexts' timeout (the collectives keep that one) and
    // begins after the op started, so Gloo can have timed out only once that deadline has
    // passed since `started`. An I/O error before that is a lost connection.
    const Millis deadline = isPointToPoint(op.op) ? op.timeout : contextTimeout_;
    if (std::chrono::steady_clock::now() - started >= deadline) {
      // Run on its caller, the op held that thread until its peers came: a rank that
      // issues ops on several groups in another order than its peers waits here.
      const std::string held =
          onCaller && !isPointToPoint(op.op)
              ? ". It ran on the calling thread, which waits for every peer to issue it: if ranks issue "
                "collectives on several groups in different orders, set backends." +
                    ctx_.backendName + ".options.inline_max: 0 (and threads >= 1) so that issuing never blocks"
              : "";
      return std::make_exception_ptr(TimeoutError(where.format() + what +
                                                      ". A peer may not have joined this collective; "
                                                      "check every rank issues the same ops in the same order" +
                                                      held,
                                                  where));
    }
    where.peer = peerNamedIn(what);
    const std::string peer = std::to_string(where.peer);
    return std::make_exception_ptr(PeerLostError(
        where.format() + (where.peer >= 0 ? "peer " + peer + " lost: " : "a peer lost: ") + what + ". " +
            (where.peer >= 0 ? "Rank " + peer : std::string("A peer process")) + " may have died; check its log",
        where));
  } catch (const std::exception& e) {
    return std::make_exception_ptr(BackendError(where.format() + "(gloo) " + e.what(), where));
  } catch (...) {
    return std::make_exception_ptr(
        BackendError(where.format() + "(gloo) an exception that is not a std::exception", where));
  }
}

// Called from the destructor: nothing may escape.
void GlooBackend::closeConnections() noexcept {
  auto close = [this](const std::shared_ptr<::gloo::Context>& context) {
    for (int peer = 0; peer < ctx_.worldSize; ++peer) {
      if (peer == ctx_.rank) continue;
      try {
        context->getPair(peer)->close();
      } catch (const std::exception& e) {
        if (ctx_.logger)
          ctx_.logger->warn(ErrorContext::of(ctx_, "gloo close", peer).format() + "closing the connection to rank " +
                            std::to_string(peer) + " failed: " + e.what());
      }
    }
  };
  for (const auto& context : contexts_) close(context);
  close(p2p_);
}

// Every wait inside Gloo ends at once (abortable.h): the queued ops' works have failed
// already, and an op running on its caller fails with this abort. The connections stay
// open while no caller is inside Gloo: closing them would make the peers' ops fail with
// "peer <this rank> lost", hiding the real cause (a hang elsewhere) behind this rank. A
// caller inside Gloo means its peers are stuck in the same collective (the supervisor
// aborts for a peer lost or a hang, when this rank's peers are failing too): then the
// connections are shut down, so that the peers see them drop at once.
void GlooBackend::abort(const std::string& reason) {
  {
    MutexLock lock(&abortMutex_);
    if (!aborted_.load()) abortReason_ = reason.empty() ? "no reason given" : reason;
    aborted_.store(true);  // seq_cst: see submit()
  }
  queue_->abort(reason);
  p2pQueue_->abort(reason);
  // Every wait inside Gloo ends now, on callers and workers alike (abortable.h); a
  // shut-down connection alone does not end a send Gloo had queued on it.
  abortRegistry_->abortAll();
  if (callersInGloo_.load() > 0) interruptConnections("to end the wait of a collective running on its caller");
}

// Finds the backend's connected sockets by their two ends (a pair's address() is its own
// end; peerByAddress_ holds the peers' ends, recorded to name lost peers) and shuts them
// down: Gloo's device thread reads the end of stream and fails the pair, and the peers see
// the connection drop. (Gloo has no call that closes a pair for its peer's sake: closing
// the pair is local, and the header that declares its signalling is missing from Debian's
// libgloo-dev.)
void GlooBackend::interruptConnections(const char* what) noexcept {
  std::set<std::string> ours;
  auto collect = [&](const std::shared_ptr<::gloo::Context>& context) {
    for (int peer = 0; peer < ctx_.worldSize; ++peer)
      if (peer != ctx_.rank) ours.insert(context->getPair(peer)->address().str());
  };
  try {
    for (const auto& context : contexts_) collect(context);
    collect(p2p_);
  } catch (const std::exception&) {
    return;  // a pair Gloo no longer has: nothing left to interrupt on it
  }
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return;
  int interrupted = 0;
  while (dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    // A duplicate: the socket checked is the one shut down, even if another thread closes
    // and reuses the number meanwhile.
    const int fd = ::fcntl(std::atoi(entry->d_name), F_DUPFD_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage local{}, remote{};
    socklen_t localLen = sizeof(local), remoteLen = sizeof(remote);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &localLen) == 0 &&    // a socket
        ::getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &remoteLen) == 0 &&  // connected
        (local.ss_family == AF_INET || local.ss_family == AF_INET6) &&
        ours.count(::gloo::transport::tcp::Address(reinterpret_cast<sockaddr*>(&local), localLen).str()) &&
        peerByAddress_.count(::gloo::transport::tcp::Address(reinterpret_cast<sockaddr*>(&remote), remoteLen).str()) &&
        ::shutdown(fd, SHUT_RDWR) == 0)
      ++interrupted;
    ::close(fd);
  }
  ::closedir(dir);
  if (ctx_.logger)
    ctx_.logger->warn("abort: shut down " + std::to_string(interrupted) + " connection(s) " + what +
                      "; the peers see them drop");
}

std::string GlooBackend::abortReason() const {
  MutexLock lock(&abortMutex_);
  return abortReason_;
}

void GlooBackend::throwAborted(const OpContext& op) const {
  raise(ErrorCode::Aborted, ErrorContext::of(op), "the gloo backend was aborted (" + abortReason() + ")",
        "Create a new group to continue");
}

void GlooBackend::shutdown() {
  queue_->drain();
  p2pQueue_->drain();
  retired_->clear();
}

}  // namespace commhost::gloo_backend
