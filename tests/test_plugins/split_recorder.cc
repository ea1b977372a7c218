// SPDX-License-Identifier: Apache-2.0
// split_recorder: a backend that records, in its own store, every Backend::prepareSplit
// call it gets and the BackendContext::splitFrom its factory gets, so a test reads what
// the host passed on every rank. Its allreduce (i64) and broadcast (i64) do nothing.
//   <parent backend store>/prepared/<round>/<rank>: "op=.. group=.. color=.. rank=.. members=a,b"
//   <subgroup backend store>/split_from/<rank>: the parent's handle (a string naming who
//                                               made it), or "none"
// Option fail_rank: the parent rank whose prepareSplit throws std::runtime_error.
#include <stdexcept>

#include "commhost/sdk/plugin.h"

namespace {
using namespace commhost;
constexpr Capabilities kCaps{{OpType::Allreduce, OpType::Broadcast},
                             {DType::Int64},
                             {ReduceOp::Sum},
                             {DeviceType::CPU},
                             {Feature::Split, Feature::MultiProcess}};

class SplitRecorder final : public Backend {
 public:
  SplitRecorder(const BackendContext& ctx, int failRank)
      : store_(ctx.store), name_(ctx.backendName), group_(ctx.groupName), rank_(ctx.rank), failRank_(failRank) {
    const auto from = std::static_pointer_cast<std::string>(ctx.splitFrom);
    store_->set("split_from/" + std::to_string(rank_), toBytes(from ? *from : "none"));
  }
  const Capabilities& capabilities() const override { return kCaps; }
  WorkPtr allreduce(const OpContext& ctx, Tensor& t, const AllreduceOptions&) override {
    return std::make_shared<CompletedWork>(ctx, std::vector<Tensor>{t});
  }
  WorkPtr broadcast(const OpContext& ctx, Tensor& t, const BroadcastOptions&) override {
    return std::make_shared<CompletedWork>(ctx, std::vector<Tensor>{t});
  }
  std::shared_ptr<void> prepareSplit(const SplitRequest& request) override {
    if (rank_ == failRank_) throw std::runtime_error("split_recorder fails on rank " + std::to_string(rank_));
    std::string members;
    for (int m : request.members) members += (members.empty() ? "" : ",") + std::to_string(m);
    store_->set("prepared/" + request.round + "/" + std::to_string(rank_),
                toBytes(std::string("op=") + request.op + " group=" + request.group +
                        " color=" + std::to_string(request.color) + " rank=" + std::to_string(request.rank) +
                        " members=" + members + " timeout=" + std::to_string(request.timeout.count())));
    // Non-null on every rank: the host must drop it where the rank joins no subgroup.
    return std::make_shared<std::string>(name_ + " of " + group_ + " rank " + std::to_string(rank_) + " for " +
                                         (request.group.empty() ? "nothing" : request.group));
  }

 private:
  StorePtr store_;
  std::string name_, group_;
  int rank_;
  int failRank_;
};

std::unique_ptr<Backend> create(const OptionValues& options, const BackendContext& ctx) {
  return std::make_unique<SplitRecorder>(ctx, static_cast<int>(options.getInt("fail_rank")));
}

const PluginDescriptor kDescriptor = {
    COMMHOST_DESCRIPTOR_PREFIX,
    PluginKind::Backend,
    "split_recorder",
    "1.0",
    "Test backend: records Backend::prepareSplit calls and BackendContext::splitFrom in its store",
    {{"fail_rank", OptionType::Int, "-1", "The parent rank whose prepareSplit throws"}},
    kCaps,
    nullptr,
    create,
};
}  // namespace

COMMHOST_PLUGIN(kDescriptor)
