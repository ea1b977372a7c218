// The shm backend's lifecycle: manifest, options, joining the group, abort, shutdown.
#include <sched.h>

#include "commhost/errors.h"
#include "rendezvous.h"
#include "shm_backend.h"

namespace commhost::shm {

const Capabilities& capabilities() {
  static const Capabilities caps = [] {
    Capabilities c{{OpType::Allreduce, OpType::AllreduceCoalesced, OpType::Broadcast, OpType::Reduce,
                    OpType::Allgather, OpType::AllgatherIntoTensor, OpType::Gather, OpType::Scatter,
                    OpType::ReduceScatter, OpType::ReduceScatterTensor, OpType::Alltoall, OpType::AlltoallSingle,
                    OpType::Barrier},
                   Capabilities::allDTypes(),
                   Capabilities::allReduceOps(),
                   {DeviceType::CPU},
                   {Feature::Split, Feature::MultiProcess}};
    return c;
  }();
  return caps;
}

const std::vector<OptionSpec>& optionSpecs() {
  static const std::vector<OptionSpec> specs = {
      {"chunk", OptionType::Size, "256KiB",
       "Bytes of one pipeline buffer; large ops move through the segment in chunks of this size", {}, 4096,
       256.0 * 1024 * 1024},
      {"depth", OptionType::Int, "4",
       "Buffers per rank in the segment: a rank may run depth - 2 chunks ahead of the slowest peer", {}, 2, 64},
      {"one_shot_max", OptionType::Size, "256KiB",
       "Allreduce messages up to this size use one-shot (every rank reduces all); larger use two-shot "
       "(reduce-scatter + allgather)", {}, 0, 1e15},
      {"inline_max", OptionType::Size, "1MiB",
       "Ops up to this size run on the calling thread when the backend is idle (no hand-off); 0: always the "
       "worker thread", {}, 0, 1e15},
      {"spin_us", OptionType::Int, "-1",
       "Microseconds a waiting rank spins before it yields; -1: 50 when every rank has a CPU of its own "
       "(world size <= CPUs this process may run on), else 1 (spinning would keep a peer off its CPU)", {}, -1,
       1000000},
      {"yield_us", OptionType::Int, "-1",
       "Microseconds a waiting rank then yields its CPU before it sleeps on a futex (an idle CPU wakes slowly); "
       "-1: 2000, or 10000 when ranks outnumber CPUs", {}, -1, 10000000},
      {"timeout", OptionType::Duration, "0s", "Rendezvous timeout; 0s: the group's timeout", {}, 0, 86400 * 7},
  };
  return specs;
}

std::unique_ptr<Backend> create(const OptionValues& options, const BackendContext& ctx) {
  Settings s;
  s.layout.world = ctx.worldSize;
  s.layout.chunk = static_cast<size_t>(options.getInt("chunk")) / 64 * 64;
  s.layout.depth = static_cast<int>(options.getInt("depth"));
  // Every rank's block of a chunk is at least a cache line, and alltoall's first step
  // puts a 16-byte header per rank in one chunk.
  if (s.layout.chunk < 64 * static_cast<size_t>(ctx.worldSize))
    raise(ErrorCode::Config, ErrorContext::of(ctx, "shm"),
          "chunk " + std::to_string(s.layout.chunk) + " B is too small for " + std::to_string(ctx.worldSize) + " ranks",
          "Next: set the shm backend's chunk option to at least 64 B x ranks (" + std::to_string(64 * ctx.worldSize) +
              ")");
  s.oneShotMax = static_cast<size_t>(options.getInt("one_shot_max"));
  s.inlineMax = static_cast<size_t>(options.getInt("inline_max"));
  // Spinning pays only when every rank runs on a CPU of its own.
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  const int cpuCount = ::sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
  const bool oversubscribed = ctx.worldSize > cpuCount;
  const int64_t spin = options.getInt("spin_us"), yield = options.getInt("yield_us");
  s.spin = std::chrono::microseconds(spin >= 0 ? spin : oversubscribed ? 1 : 50);
  s.yield = std::chrono::microseconds(yield >= 0 ? yield : oversubscribed ? 10000 : 2000);
  s.timeout = options.getDuration("timeout");
  if (s.timeout.count() == 0) s.timeout = ctx.timeout;
  return std::make_unique<ShmBackend>(s, ctx);
}

ShmBackend::ShmBackend(const Settings& settings, const BackendContext& ctx) : ctx_(ctx), settings_(settings) {
  checkSameHost(ctx_);
  segment_ = connectSegment(ctx_, settings_.layout, settings_.timeout);
  channel_ = std::make_unique<Channel>(*segment_, ctx_.rank, ctx_.groupName, abort_, settings_.spin, settings_.yield);
  executor_ = std::make_unique<Executor>(*channel_, abort_);
}

ShmBackend::~ShmBackend() { executor_.reset(); }

void ShmBackend::abort(const std::string& reason) {
  abort_.set(reason);
  executor_->abort(reason);
}

void ShmBackend::shutdown() { executor_->drain(); }

}  // namespace commhost::shm
