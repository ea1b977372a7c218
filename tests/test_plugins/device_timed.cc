// SPDX-License-Identifier: Apache-2.0
// devtimed: a backend whose works report a device time (Work::deviceMs()), as a GPU
// backend's do, without a GPU: an f32 allreduce at world size 1 (the tensor stays as it
// is) that ends on a worker thread `delay` later and reports element 0 of its tensor, as
// given, as its device time in ms; a negative element 0 makes the op fail instead.
//
// `stream_wait: true` makes wait() return before the op ended, as nccl's default wait
// does (the caller's stream is ordered after the op, the CPU goes on), so the host must
// take the op's end, and its device time, from the work's completion, not from wait().
#include <chrono>
#include <optional>
#include <thread>

#include "commhost/sdk/plugin.h"
#include "commhost/sdk/work_queue.h"

namespace {

using namespace commhost;

constexpr Capabilities kCaps{
    {OpType::Allreduce, OpType::Barrier}, {DType::Float32}, {ReduceOp::Sum}, {DeviceType::CPU}, {Feature::Split}};

class TimedWork final : public AsyncWork {
 public:
  TimedWork(const OpContext& ctx, double ms, bool streamWait) : AsyncWork(ctx), ms_(ms), streamWait_(streamWait) {}
  bool wait(std::chrono::milliseconds timeout) override {
    if (streamWait_) {
      if (auto error = exception()) std::rethrow_exception(error);
      return true;
    }
    return AsyncWork::wait(timeout);
  }
  // Known once the work finished well, as events that both fired.
  std::optional<double> deviceMs() override {
    if (!isCompleted() || exception()) return std::nullopt;
    return ms_;
  }

 private:
  const double ms_;
  const bool streamWait_;
};

class DeviceTimed final : public Backend {
 public:
  DeviceTimed(bool streamWait, std::chrono::milliseconds delay)
      : streamWait_(streamWait), delay_(delay), queue_("devtimed backend", 1, {}) {}
  const Capabilities& capabilities() const override { return kCaps; }
  WorkPtr allreduce(const OpContext& ctx, Tensor& t, const AllreduceOptions&) override {
    const double ms = t.data_as<float>()[0];
    auto work = std::make_shared<TimedWork>(ctx, ms, streamWait_);
    const auto delay = delay_;
    return queue_.submit(
        ctx,
        [t, ms, delay]() -> std::vector<Tensor> {
          std::this_thread::sleep_for(delay);
          if (ms < 0) throw BackendError("devtimed: element 0 is negative, so this op fails");
          return {t};
        },
        false, work);
  }
  WorkPtr barrier(const OpContext& ctx, const BarrierOptions&) override {
    return std::make_shared<CompletedWork>(ctx, std::vector<Tensor>{});
  }
  void abort(const std::string& reason) override { queue_.abort(reason); }

 private:
  const bool streamWait_;
  const std::chrono::milliseconds delay_;
  WorkQueue queue_;
};

std::unique_ptr<Backend> create(const OptionValues& options, const BackendContext& ctx) {
  if (ctx.worldSize != 1) throw PluginError("the devtimed test backend serves world size 1 only");
  return std::make_unique<DeviceTimed>(options.getBool("stream_wait"),
                                       std::chrono::milliseconds(options.getInt("delay_ms")));
}

const PluginDescriptor kDescriptor = {
    COMMHOST_DESCRIPTOR_PREFIX,
    PluginKind::Backend,
    "devtimed",
    "1.0",
    "Test backend whose works report a device time (element 0 of the tensor, in ms)",
    {
        {"stream_wait", OptionType::Bool, "false", "wait() returns before the op ended, as nccl's default"},
        {"delay_ms", OptionType::Int, "20", "how long after the call each op ends", {}, 0, 10000},
    },
    kCaps,
    nullptr,
    create,
};

}  // namespace

COMMHOST_PLUGIN(kDescriptor)
