// SPDX-License-Identifier: Apache-2.0
// The shm backend's lifecycle: manifest, options, joining the group, abort, shutdown.

#include "commhost/errors.h"
#include "rendezvous.h"
#include "shm_backend.h"

namespace commhost::shm {

const Capabilities& capabilities() {
  static const Capabilities caps = [] {
    Capabilities c{{OpType::Allreduce, OpType::AllreduceCoalesced, OpType::Broadcast, OpType::Reduce, OpType::Allgather,
                    OpType::AllgatherIntoTensor, OpType::Gather, OpType::Scatter, OpType::ReduceScatter,
                    OpType::ReduceScatterTensor, OpType::Alltoall, OpType::AlltoallSingle, OpType::Barrier},
                   Capabilities::allDTypes(),
                   Capabilities::allReduceOps(),
                   {DeviceType::CPU},
                   {Feature::Split, Feature::MultiProcess}};
    return c;
  }();
  return caps;
}

OptionSchema<Options> Options::schema() {
  return OptionSchema<Options>()
      .size("chunk", &Options::chunk, "256KiB",
            "Bytes of one pipeline buffer; large ops move through the segment in chunks of this size",
            {4096, 256.0 * 1024 * 1024})
      .option("depth", &Options::depth, "4",
              "Buffers per rank in the segment: a rank may run depth - 2 chunks ahead of the slowest peer", {2, 64})
      .size("one_shot_max", &Options::oneShotMax, "256KiB",
            "Allreduce messages up to this size use one-shot (every rank reduces all); larger use two-shot "
            "(reduce-scatter + allgather)",
            {0, 1e15})
      .size("inline_max", &Options::inlineMax, "1MiB",
            "Ops up to this size run on the calling thread when the backend is idle (no hand-off); 0: always the "
            "worker thread",
            {0, 1e15})
      .option("spin_us", &Options::spinUs, "-1",
              "Microseconds a waiting rank spins before it yields; -1: 50 when every rank has a CPU of its own "
              "(world size <= CPUs this process may run on), else 0: yield at once, since spinning would keep a peer "
              "sharing the CPU off it (4 ranks on 2 CPUs: 8 B 5.0 against 5.3 us with 1)",
              {-1, 1000000})
      .option("yield_us", &Options::yieldUs, "-1",
              "Microseconds a waiting rank then yields its CPU before it sleeps on a futex (an idle CPU wakes "
              "slowly); -1: 2000, or 10000 when ranks outnumber CPUs",
              {-1, 10000000})
      .option("timeout", &Options::timeout, "0s", "Rendezvous timeout; 0s: the group's timeout", {0, 86400 * 7});
}

// Alltoall's first step also puts a 16-byte header per rank in one chunk.
void Options::validate(const BackendContext& ctx) const {
  const int64_t usable = chunk / 64 * 64;
  if (usable < 64 * static_cast<int64_t>(ctx.worldSize))
    refuseOption("chunk", std::to_string(usable) + " B is too small for " + std::to_string(ctx.worldSize) + " ranks",
                 "Next: set the shm backend's chunk option to at least 64 B x ranks (" +
                     std::to_string(64 * ctx.worldSize) + ")");
}

std::unique_ptr<Backend> create(const Options& options, const BackendContext& ctx) {
  Settings s;
  s.layout.world = ctx.worldSize;
  s.layout.chunk = static_cast<size_t>(options.chunk) / 64 * 64;  // whole cache lines
  s.layout.depth = options.depth;
  s.oneShotMax = options.oneShotMax;
  s.inlineMax = options.inlineMax;
  // Spinning pays only when every rank runs on a CPU of its own.
  const bool oversubscribed = ctx.worldSize > WorkQueue::usableCpus();
  s.spin = std::chrono::microseconds(options.spinUs >= 0 ? options.spinUs : oversubscribed ? 0 : 50);
  s.yield = std::chrono::microseconds(options.yieldUs >= 0 ? options.yieldUs : oversubscribed ? 10000 : 2000);
  s.timeout = options.timeout;
  if (s.timeout.count() == 0) s.timeout = ctx.timeout;
  return std::make_unique<ShmBackend>(s, ctx);
}

ShmBackend::ShmBackend(const Settings& settings, const BackendContext& ctx) : ctx_(ctx), settings_(settings) {
  checkSameHost(ctx_);
  segment_ = connectSegment(ctx_, settings_.layout, settings_.timeout);
  channel_ = std::make_unique<Channel>(*segment_, ctx_.rank, ctx_.groupName, abort_, settings_.spin, settings_.yield);
  WorkQueue::Hooks hooks;
  hooks.beforeEach = [this](const OpContext& op) {
    checkUsable(op);  // an op queued behind a failure or abort never touches the segment
    channel_->start(op);
  };
  hooks.describe = [this](const OpContext& op, const std::exception_ptr& error) { return failed(op, error); };
  queue_ = std::make_unique<WorkQueue>("shm backend", 1, std::move(hooks));
}

ShmBackend::~ShmBackend() { queue_.reset(); }

void ShmBackend::refuse(const OpContext& op) {
  const ErrorContext where = ErrorContext::of(op);
  if (abort_.isSet()) raise(ErrorCode::Aborted, where, "the shm backend was aborted (" + abort_.reason() + ")");
  // Not aborted, so broken_ (checkUsable's other reason; both are only ever set).
  std::string reason;
  {
    MutexLock lock(&brokenMutex_);
    reason = brokenReason_;
  }
  raise(ErrorCode::Backend, where, "the shm backend is unusable after an earlier op failed: " + reason,
        "Ranks no longer agree on the shared-memory steps; destroy this group and create a new one.");
}

std::exception_ptr ShmBackend::failed(const OpContext& op, std::exception_ptr error) {
  const ErrorContext where = ErrorContext::of(op);
  try {
    std::rethrow_exception(error);
  } catch (const InvalidArgument&) {
    return error;  // every rank found the same problem before moving data: still in step
  } catch (const Error& e) {
    MutexLock lock(&brokenMutex_);
    if (!broken_.load(std::memory_order_relaxed)) brokenReason_ = e.what();
  } catch (const std::exception& e) {
    error = std::make_exception_ptr(BackendError(where.format() + "shm: " + e.what()));
    MutexLock lock(&brokenMutex_);
    if (!broken_.load(std::memory_order_relaxed)) brokenReason_ = e.what();
  }
  broken_.store(true, std::memory_order_release);
  return error;
}

// The AbortFlag first: the running op's waits notice it and return.
void ShmBackend::abort(const std::string& reason) {
  abort_.set(reason);
  queue_->abort(reason);
}

void ShmBackend::shutdown() { queue_->drain(); }

}  // namespace commhost::shm
