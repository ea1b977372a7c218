// SPDX-License-Identifier: Apache-2.0
// storecoll: a reference backend that moves every byte through the Store. Slow and
// simple on purpose: each rank publishes what it sends under a key of the op's seq, and
// reads what it needs, so its results are easy to trust. The tests use it to run real
// multi-rank groups (ranks as threads over a HashStore). Ops complete inside the call.
// Built a second time as `allreduceonly` (STORECOLL_ALLREDUCE_ONLY): the same code behind a
// manifest of one op, one dtype and one reduce op, as a specialised backend declares.
// Built a third time as `failrank` (STORECOLL_FAIL_RANK), for hot-swap tests: its factory
// first rendezvouses through the store like a real backend, and on the rank its options
// name it throws (fail: throw), kills its own process (fail: kill) or first sleeps (slow_rank).
// Built as `shortvalue` (STORECOLL_SHORT_VALUE): its allgathers complete with a value other
// than their outputs, which the host must refuse (the Work contract).
// Built twice more as `reloadable` (STORECOLL_RELOAD_ADD / _VERSION), for plugin reload tests:
// its float allreduce adds the build's constant to every element, so a result tells which
// build ran it.
// The plain build's option `op_delay` makes each allreduce first sleep that long: a backend
// slower than another by a known margin, for live re-routing tests.
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "commhost/errors.h"
#include "commhost/kernels/reduce.h"
#include "commhost/sdk/plugin.h"

namespace {

using namespace commhost;

class StoreCollBackend final : public Backend {
 public:
  explicit StoreCollBackend(const BackendContext& ctx, std::chrono::milliseconds opDelay = {})
      : ctx_(ctx), opDelay_(opDelay) {}

  const Capabilities& capabilities() const override { return caps(); }
  static const Capabilities& caps() {
#ifdef STORECOLL_ALLREDUCE_ONLY
    // A specialised backend: the manifest offers f32 sum allreduce and nothing else.
    static const Capabilities c{{OpType::Allreduce}, {DType::Float32}, {ReduceOp::Sum}, {DeviceType::CPU}, {
                                  Feature::MultiProcess
                                }};
#else
    static const Capabilities c{Capabilities::allOps(),
                                Capabilities::allDTypes(),
                                Capabilities::allReduceOps(),
                                {DeviceType::CPU},
                                { Feature::Split,
                                  Feature::MultiProcess }};
#endif
    return c;
  }

  WorkPtr allreduce(const OpContext& op, Tensor& t, const AllreduceOptions& o) override {
    if (opDelay_.count() > 0) std::this_thread::sleep_for(opDelay_);
    reduceAll(op, "", t, t, o.reduceOp);
#ifdef STORECOLL_RELOAD_ADD
    if (t.dtype() == DType::Float32)
      for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] += STORECOLL_RELOAD_ADD;
#endif
    return done(op, {t});
  }
  WorkPtr allreduceCoalesced(const OpContext& op, std::vector<Tensor>& ts,
                             const AllreduceCoalescedOptions& o) override {
    for (size_t i = 0; i < ts.size(); ++i) reduceAll(op, std::to_string(i), ts[i], ts[i], o.reduceOp);
    return done(op, ts);
  }
  WorkPtr broadcast(const OpContext& op, Tensor& t, const BroadcastOptions& o) override {
    if (ctx_.rank == o.root) put(key(op, o.root), t);
    else take(op, key(op, o.root), t);
    return done(op, {t});
  }
  WorkPtr reduce(const OpContext& op, Tensor& t, const ReduceOptions& o) override {
    put(key(op, ctx_.rank), t);
    if (ctx_.rank == o.root)
      combine(
          op, [&](int r) { return key(op, r); }, t, o.reduceOp);
    return done(op, {t});
  }
  WorkPtr allgather(const OpContext& op, std::vector<Tensor>& outs, const Tensor& in,
                    const AllgatherOptions&) override {
    put(key(op, ctx_.rank), in);
    for (int r = 0; r < ctx_.worldSize; ++r) take(op, key(op, r), outs[r]);
#ifdef STORECOLL_SHORT_VALUE
    return done(op, {outs[0]});  // the outputs are right; the work's value is not
#else
    return done(op, outs);
#endif
  }
  WorkPtr allgatherIntoTensor(const OpContext& op, Tensor& out, const Tensor& in, const AllgatherOptions&) override {
    put(key(op, ctx_.rank), in);
    for (int r = 0; r < ctx_.worldSize; ++r) {
      Tensor part = out.slice(r * in.numel(), in.numel());
      take(op, key(op, r), part);
    }
#ifdef STORECOLL_SHORT_VALUE
    return done(op, {out.slice(0, in.numel())});
#else
    return done(op, {out});
#endif
  }
  WorkPtr allgatherCoalesced(const OpContext& op, std::vector<std::vector<Tensor>>& outs,
                             const std::vector<Tensor>& ins, const AllgatherOptions&) override {
    for (size_t i = 0; i < ins.size(); ++i) {
      put(key(op, ctx_.rank, std::to_string(i)), ins[i]);
      for (int r = 0; r < ctx_.worldSize; ++r) take(op, key(op, r, std::to_string(i)), outs[i][r]);
    }
    return done(op, {});
  }
  WorkPtr gather(const OpContext& op, std::vector<Tensor>& outs, const Tensor& in, const GatherOptions& o) override {
    put(key(op, ctx_.rank), in);
    if (ctx_.rank == o.root)
      for (int r = 0; r < ctx_.worldSize; ++r) take(op, key(op, r), outs[r]);
    return done(op, outs);
  }
  WorkPtr scatter(const OpContext& op, Tensor& out, const std::vector<Tensor>& ins, const ScatterOptions& o) override {
    if (ctx_.rank == o.root)
      for (int r = 0; r < ctx_.worldSize; ++r) put(key(op, o.root, "to" + std::to_string(r)), ins[r]);
    take(op, key(op, o.root, "to" + std::to_string(ctx_.rank)), out);
    return done(op, {out});
  }
  WorkPtr reduceScatter(const OpContext& op, Tensor& out, const std::vector<Tensor>& ins,
                        const ReduceScatterOptions& o) override {
    for (int r = 0; r < ctx_.worldSize; ++r) put(key(op, ctx_.rank, "to" + std::to_string(r)), ins[r]);
    combine(
        op, [&](int r) { return key(op, r, "to" + std::to_string(ctx_.rank)); }, out, o.reduceOp);
    return done(op, {out});
  }
  WorkPtr reduceScatterTensor(const OpContext& op, Tensor& out, const Tensor& in,
                              const ReduceScatterOptions& o) override {
    for (int r = 0; r < ctx_.worldSize; ++r)
      put(key(op, ctx_.rank, "to" + std::to_string(r)), in.slice(r * out.numel(), out.numel()));
    combine(
        op, [&](int r) { return key(op, r, "to" + std::to_string(ctx_.rank)); }, out, o.reduceOp);
    return done(op, {out});
  }
  WorkPtr alltoall(const OpContext& op, std::vector<Tensor>& outs, const std::vector<Tensor>& ins,
                   const AlltoallOptions&) override {
    for (int r = 0; r < ctx_.worldSize; ++r) put(key(op, ctx_.rank, "to" + std::to_string(r)), ins[r]);
    for (int r = 0; r < ctx_.worldSize; ++r) take(op, key(op, r, "to" + std::to_string(ctx_.rank)), outs[r]);
    return done(op, outs);
  }
  WorkPtr alltoallSingle(const OpContext& op, Tensor& out, const Tensor& in, const AlltoallSingleOptions& o) override {
    const int64_t inRow = in.shape().ndim() && in.shape()[0] ? in.numel() / in.shape()[0] : 0;
    const int64_t outRow = out.shape().ndim() && out.shape()[0] ? out.numel() / out.shape()[0] : 0;
    int64_t offset = 0;
    for (int r = 0; r < ctx_.worldSize; ++r) {
      const int64_t n = o.inputSplitSizes[r] * inRow;
      put(key(op, ctx_.rank, "to" + std::to_string(r)), in.slice(offset, n));
      offset += n;
    }
    offset = 0;
    for (int r = 0; r < ctx_.worldSize; ++r) {
      const int64_t n = o.outputSplitSizes[r] * outRow;
      Tensor part = out.slice(offset, n);
      take(op, key(op, r, "to" + std::to_string(ctx_.rank)), part);
      offset += n;
    }
    return done(op, {out});
  }
  WorkPtr barrier(const OpContext& op, const BarrierOptions&) override {
    const std::string k = "seq" + std::to_string(op.seq) + "/barrier";
    ctx_.store->add(k, 1);
    const auto deadline = std::chrono::steady_clock::now() + op.timeout;
    while (ctx_.store->add(k, 0) < ctx_.worldSize) {
      if (std::chrono::steady_clock::now() > deadline)
        throw TimeoutError("barrier seq " + std::to_string(op.seq) + ": not every rank arrived");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return done(op, {});
  }
  WorkPtr send(const OpContext& op, const Tensor& t, int dst, const SendOptions& o) override {
    const int64_t n = ctx_.store->add(p2pCounter(ctx_.rank, dst, o.tag), 1);
    put(p2pKey(ctx_.rank, dst, o.tag, n), t);
    return done(op, {});
  }
  WorkPtr recv(const OpContext& op, Tensor& t, int src, const RecvOptions& o) override {
    take(op, p2pKey(src, ctx_.rank, o.tag, ++received_[src]), t);
    return done(op, {t});
  }
  WorkPtr recvAnySource(const OpContext& op, Tensor& t, const RecvOptions& o) override {
    const auto deadline = std::chrono::steady_clock::now() + op.timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      for (int src = 0; src < ctx_.worldSize; ++src) {
        if (src == ctx_.rank) continue;
        const std::string k = p2pKey(src, ctx_.rank, o.tag, received_[src] + 1);
        if (ctx_.store->check({k})) {
          ++received_[src];
          take(op, k, t);
          auto work = std::make_shared<AsyncWork>(op);
          work->finish({t}, src);
          return work;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    throw TimeoutError("recv_any_source seq " + std::to_string(op.seq) + ": nothing arrived");
  }
  void abort(const std::string&) override {}
  void shutdown() override {}

 private:
  static WorkPtr done(const OpContext& op, std::vector<Tensor> outs) {
    return std::make_shared<CompletedWork>(op, std::move(outs));
  }
  static std::string key(const OpContext& op, int rank, const std::string& part = "") {
    return "seq" + std::to_string(op.seq) + "/" + part + "/" + std::to_string(rank);
  }
  static std::string p2pCounter(int src, int dst, int tag) {
    return "p2p/" + std::to_string(src) + "-" + std::to_string(dst) + "/" + std::to_string(tag);
  }
  static std::string p2pKey(int src, int dst, int tag, int64_t n) {
    return p2pCounter(src, dst, tag) + "/" + std::to_string(n);
  }
  void put(const std::string& k, const Tensor& t) {
    const auto* p = static_cast<const uint8_t*>(t.data());
    ctx_.store->set(k, Bytes(p, p + t.nbytes()));
  }
  void take(const OpContext& op, const std::string& k, Tensor& t) {
    ctx_.store->wait({k}, op.timeout);
    const Bytes b = ctx_.store->get(k);
    if (b.size() != t.nbytes())
      throw InvalidArgument(std::string(opName(op.op)) + " seq " + std::to_string(op.seq) + ": a peer sent " +
                            std::to_string(b.size()) + " bytes for a " + std::to_string(t.nbytes()) + "-byte tensor");
    std::memcpy(t.data(), b.data(), b.size());
  }
  // out = op over ranks (in rank order) of the tensors at keyOf(rank), times the final scale.
  template <class KeyOf> void combine(const OpContext& op, KeyOf keyOf, Tensor& out, const ReduceOp& rop) {
    std::vector<Tensor> parts;
    std::vector<const void*> srcs;
    for (int r = 0; r < ctx_.worldSize; ++r) {
      parts.push_back(Tensor::empty(out.shape(), out.dtype()));
      take(op, keyOf(r), parts.back());
      srcs.push_back(parts.back().data());
    }
    kernels::reduceSourcesBuffer(out.data(), srcs.data(), ctx_.worldSize, out.numel(), out.dtype(), rop.kind,
                                 kernels::finalScale(rop, ctx_.worldSize));
  }
  void reduceAll(const OpContext& op, const std::string& part, const Tensor& in, Tensor& out, const ReduceOp& rop) {
    put(key(op, ctx_.rank, part), in);
    combine(
        op, [&](int r) { return key(op, r, part); }, out, rop);
  }

  BackendContext ctx_;
  std::chrono::milliseconds opDelay_;
  std::map<int, int64_t> received_;  // per source: messages taken so far (caller's thread only)
};

#ifdef STORECOLL_FAIL_RANK
std::unique_ptr<Backend> create(const OptionValues& o, const BackendContext& ctx) {
  if (ctx.rank == o.getInt("slow_rank")) std::this_thread::sleep_for(o.getDuration("delay"));
  if (ctx.rank == o.getInt("fail_rank")) {
    if (o.getString("fail") == "kill") ::kill(::getpid(), SIGKILL);
    raise(ErrorCode::Plugin, ErrorContext::of(ctx, "rendezvous"), "failrank was told to fail on this rank",
          "set fail_rank: -1");
  }
  ctx.store->set("up/" + std::to_string(ctx.rank), toBytes("1"));
  std::vector<std::string> keys;
  for (int r = 0; r < ctx.worldSize; ++r) keys.push_back("up/" + std::to_string(r));
  ctx.store->wait(keys, ctx.timeout);
  return std::make_unique<StoreCollBackend>(ctx);
}
#elif defined(STORECOLL_ALLREDUCE_ONLY) || defined(STORECOLL_OFF_BY_ONE) || defined(STORECOLL_RELOAD_ADD) || \
    defined(STORECOLL_SHORT_VALUE)
std::unique_ptr<Backend> create(const OptionValues&, const BackendContext& ctx) {
  return std::make_unique<StoreCollBackend>(ctx);
}
#else
std::unique_ptr<Backend> create(const OptionValues& o, const BackendContext& ctx) {
  return std::make_unique<StoreCollBackend>(ctx, o.getDuration("op_delay"));
}
#endif

const PluginDescriptor kDescriptor = {
    COMMHOST_DESCRIPTOR_PREFIX,
    PluginKind::Backend,
#if defined(STORECOLL_ALLREDUCE_ONLY)
    "allreduceonly",
    "1.0",
    "Test specialised backend: f32 sum allreduce only, every byte through the store",
    {},
#elif defined(STORECOLL_OFF_BY_ONE)
    "offbyone",
    "1.0",
    "Test backend (storecoll) whose allreduce adds 1: a shadow that disagrees",
    {},
#elif defined(STORECOLL_RELOAD_ADD)
    "reloadable",
    STORECOLL_RELOAD_VERSION,
    "Test backend (storecoll) whose allreduce adds a constant that tells its build",
    {},
#elif defined(STORECOLL_SHORT_VALUE)
    "shortvalue",
    "1.0",
    "Test backend (storecoll) whose allgathers complete with a short value: a broken Work contract",
    {},
#elif defined(STORECOLL_FAIL_RANK)
    "failrank",
    "1.0",
    "Test backend (storecoll) whose factory fails, kills itself or is slow on one rank",
    {
        {"fail_rank", OptionType::Int, "-1", "the rank whose factory fails (-1: none)", {}, -1, 1 << 20},
        {"fail", OptionType::Enum, "throw", "how it fails", {"throw", "kill"}},
        {"slow_rank", OptionType::Int, "-1", "the rank whose factory first sleeps `delay`", {}, -1, 1 << 20},
        {"delay", OptionType::Duration, "0s", "how long the slow rank sleeps"},
    },
#else
    "storecoll",
    "1.0",
    "Test reference backend: every byte through the store",
    {
        {"op_delay", OptionType::Duration, "0s", "each allreduce first sleeps this long (a known slow backend)"},
    },
#endif
    StoreCollBackend::caps(),
    nullptr,
    create,
};

}  // namespace

COMMHOST_PLUGIN(kDescriptor)
