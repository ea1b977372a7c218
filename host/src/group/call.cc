// SPDX-License-Identifier: Apache-2.0
#include "call.h"

#include <sys/syscall.h>
#include <unistd.h>

#include "../supervisor/desync.h"
#include "../supervisor/supervisor.h"
#include "commhost/stream.h"

namespace commhost {

ErrorContext ProcessGroup::Impl::Call::where(int peer) const {
  ErrorContext w;
  w.group = pg.name_;
  w.rank = pg.rank_;
  w.op = opName(op);
  w.seq = ctx.seq ? ctx.seq : (isPointToPoint(op) ? pg.p2pSeq_ : pg.seq_).load(std::memory_order_relaxed) + 1;
  w.peer = peer;
  return w;
}

void ProcessGroup::Impl::Call::invalid(const std::string& what, const std::string& hint) const {
  raise(ErrorCode::InvalidArgument, where(), what, hint);
}

void ProcessGroup::Impl::Call::checkTensor(const Tensor& t, const char* name) {
  if (pg.checkCollectives_ && agree != Agree::Nothing) {
    // The device type, not its index: ranks use different GPUs of one kind.
    fingerprint += std::string(fingerprint.empty() ? "" : ", ") + name + "=" + dtypeName(t.dtype()) +
                   (agree == Agree::Full ? t.shape().str() : std::string("[...]")) + " on " +
                   deviceTypeName(t.device().type);
  }
  if (!t.defined()) invalid(std::string(name) + " is an undefined tensor (null data)", "pass an allocated tensor");
  if (!st.routes.servesDevice(t.device().type))
    invalid(std::string(name) + " is " + t.str() + " but no route serves " + deviceTypeName(t.device().type) +
                " tensors in this group",
            "add a route for that device to the config, or pass a tensor on a device it routes");
}

void ProcessGroup::Impl::Call::checkLike(const Tensor& ref, const Tensor& t, const std::string& name, bool sameNumel) {
  checkTensor(t, name.c_str());
  if (t.dtype() != ref.dtype() || t.device() != ref.device() || (sameNumel && t.numel() != ref.numel()))
    invalid(name + " is " + t.str() + " but must match " + ref.str() +
                (sameNumel ? " in dtype, device and element count" : " in dtype and device"),
            "allocate it to match");
}

void ProcessGroup::Impl::Call::checkCount(size_t got, size_t want, const char* what) const {
  if (got != want)
    invalid(std::string("got ") + std::to_string(got) + " " + what + ", expected " + std::to_string(want),
            "pass one per rank of the group (size " + std::to_string(pg.worldSize_) + ")");
}

void ProcessGroup::Impl::Call::checkRoot(int root) {
  if (pg.checkCollectives_) fingerprint += ", root=" + std::to_string(root);
  if (root < 0 || root >= pg.worldSize_)
    invalid("root " + std::to_string(root) + " is outside the group (size " + std::to_string(pg.worldSize_) + ")",
            "use a rank in [0, " + std::to_string(pg.worldSize_) + ")");
}

void ProcessGroup::Impl::Call::checkPeer(int peer, const char* role) const {
  if (peer < 0 || peer >= pg.worldSize_)
    invalid(std::string(role) + " rank " + std::to_string(peer) + " is outside the group (size " +
                std::to_string(pg.worldSize_) + ")",
            "use a rank in [0, " + std::to_string(pg.worldSize_) + ")");
  if (peer == pg.rank_)
    invalid(std::string(role) + " rank " + std::to_string(peer) + " is this rank itself", "copy locally instead");
}

// "routes: - { op: allreduce, dtype: bf16, reduce_op: avg, backend: [NAME, ...] }", the
// config entry that would serve this call.
std::string ProcessGroup::Impl::Call::routeExample(std::optional<DType> dtype, const ReduceOp* reduceOp) const {
  std::string keys = std::string("op: ") + opName(op);
  if (dtype) keys += std::string(", dtype: ") + dtypeName(*dtype);
  if (reduceOp) keys += std::string(", reduce_op: ") + reduceOpName(reduceOp->kind);
  return "`routes: - { " + keys + ", backend: [NAME, ...] }`";
}

void ProcessGroup::Impl::Call::checkReduceOp(const ReduceOp& reduceOp, DType dtype) {
  if (pg.checkCollectives_) fingerprint += std::string(", op=") + reduceOpName(reduceOp.kind);
  const bool floating = isFloating(dtype);
  if (reduceOp.isBitwise() && floating)
    invalid(std::string("reduce op ") + reduceOpName(reduceOp.kind) + " needs an integer or bool tensor, got " +
                dtypeName(dtype),
            "use sum/min/max/product for floating-point data");
  if ((reduceOp.kind == ReduceOp::Avg || reduceOp.kind == ReduceOp::PreMulSum) && !floating)
    invalid(std::string("reduce op ") + reduceOpName(reduceOp.kind) + " needs a floating-point tensor, got " +
                dtypeName(dtype),
            "convert to a floating-point dtype, or use sum and divide yourself");
}

Backend& ProcessGroup::Impl::Call::issue(Device device, int64_t bytes, std::optional<DType> dtype, Millis timeout,
                                         const ReduceOp* reduceOp) {
  if (pg.aborted_->load(std::memory_order_acquire)) {
    const std::string why = pg.abortTargets_->why();
    raise(ErrorCode::Aborted, where(), "the group was aborted" + (why.empty() ? std::string() : " (" + why + ")"),
          "create a new group to continue");
  }
  const ReduceOp::Kind kind = reduceOp ? reduceOp->kind : ReduceOp::Sum;
  const RouteTable::Segment* segment = st.routes.find(op, device.type, bytes, dtype.value_or(DType::Float32), kind);
  const int index = segment ? segment->backend : -1;
  if (index < 0)
    invalid(st.routes.whyUnserved(op, device.type, bytes, dtype.value_or(DType::Float32), kind),
            "route it in the config: " + routeExample(dtype, reduceOp) +
                ", listing backends whose manifest has it (`commhost plugins inspect PLUGIN`)");
  Backend* backend = st.backends[index].get();
  if (!backend)
    raise(ErrorCode::Plugin, where(),
          "routed to backend '" + st.routes.backendNames()[index] + "', which is unavailable on this host (" +
              st.unavailable[index] + ")",
          "route this op to another backend, or fix what the plugin needs");
  // The table was resolved against the plugin's manifest; a backend object that declares
  // less at run time than its manifest still fails here rather than inside the backend.
  const Capabilities& caps = backend->capabilities();
  if (dtype && !caps.dtypes.has(*dtype))
    invalid(
        std::string("backend '") + st.routes.backendNames()[index] + "' does not support dtype " + dtypeName(*dtype),
        "route it to another backend: " + routeExample(dtype, nullptr) + ", or convert the data");
  if (reduceOp && !caps.reduceOps.has(reduceOp->kind))
    invalid(std::string("backend '") + st.routes.backendNames()[index] + "' does not support reduce op " +
                reduceOpName(reduceOp->kind),
            "route it to another backend: " + routeExample(std::nullopt, reduceOp));
  ctx.op = op;
  if (!ownsContext) ctx.group = pg.name_;  // the group's own context holds its name already
  ctx.rank = pg.rank_;
  ctx.stream = currentStream();
  // Point-to-point ops involve two ranks only, so they count apart from collectives,
  // whose seq must stay equal on every rank.
  // One thread at a time issues on a group (process_group.h; the Reducer hands the
  // launcher role over under its mutex), so a load and a store suffice where a
  // read-modify-write would be a locked instruction on every op. Atomic for other
  // threads' reads.
  std::atomic<uint64_t>& counter = isPointToPoint(op) ? pg.p2pSeq_ : pg.seq_;
  ctx.seq = counter.load(std::memory_order_relaxed) + 1;
  counter.store(ctx.seq, std::memory_order_relaxed);
  pg.bytesIssued_.store(pg.bytesIssued_.load(std::memory_order_relaxed) + static_cast<uint64_t>(bytes),
                        std::memory_order_relaxed);
  ctx.timeout = timeout.count() > 0 ? timeout : st.timeout;
  backendIndex = index;
  if (segment->shadow >= 0) {
    const RouteSpec& route = st.config->routes[static_cast<size_t>(segment->route)];
    if (st.backends[segment->shadow] && device.type == DeviceType::CPU && RouteTable::sampled(ctx.seq, route.sample)) {
      shadowIndex = segment->shadow;
      shadowRoute = &route;
      if (segment->live >= 0) {  // tune: live: the candidates take turns, by seq (alike on every rank)
        const std::vector<int>& candidates = st.routes.liveCandidates(*segment);
        shadowIndex = candidates[RouteTable::livePick(ctx.seq, candidates.size())];
        if (!st.backends[shadowIndex]) shadowIndex = -1;
        live = true;
        liveReduceOp = kind;
      }
    }
  }
  bytes_ = bytes;
  dtype_ = dtype.value_or(DType::UInt8);  // the flight recorder shows u8 for a dataless op
  if (pg.checkCollectives_ && !isPointToPoint(op))
    supervisor::checkFingerprints(*pg.monitor_, ctx.seq, op, std::string(opName(op)) + "(" + fingerprint + ")",
                                  ctx.timeout);
  if (pg.supervisor_) {
    if (pg.supervisor_->timesOp(*pg.monitor_, ctx.seq, bytes)) issued = pg.supervisor_->clock().now();
    // Until supervise(): the watchdog aborts the backends if a peer is lost meanwhile.
    pg.monitor_->inBackendCallOp.store(static_cast<uint8_t>(op), std::memory_order_relaxed);
    pg.monitor_->inBackendCall.store(ctx.seq, std::memory_order_release);  // after its op
    inBackend = true;
  }
  return *backend;
}

ProcessGroup::Impl::Call::~Call() {
  if (inBackend) pg.monitor_->inBackendCall.store(0, std::memory_order_relaxed);  // the backend threw
  if (ownsIssuer) pg.issuer_.store(0, std::memory_order_release);
  if (ownsContext) pg.callContextBusy_.store(false, std::memory_order_release);
}

namespace {
// The kernel's id of the calling thread (what ps -L, gdb and /proc/<pid>/task show).
uint64_t threadId() {
  thread_local const uint64_t id = static_cast<uint64_t>(::syscall(SYS_gettid));
  return id;
}
}  // namespace

// Every rank must issue one group's ops in one order, and the seq numbers, the route's
// state and a backend's queue assume one caller at a time: two threads issuing at once
// desynchronise the ranks in ways that surface far from the cause. Sequential calls from
// different threads (a Reducer's hooks, the caller's thread) are fine; overlap is not.
void ProcessGroup::Impl::Call::claimIssuer() {
  const uint64_t mine = (threadId() << 8) | static_cast<uint64_t>(op);
  uint64_t other = 0;
  if (pg.issuer_.compare_exchange_strong(other, mine, std::memory_order_acq_rel)) {
    ownsIssuer = true;
    return;
  }
  if ((other >> 8) == (mine >> 8)) return;  // a call this thread makes inside its own call
  raise(ErrorCode::InvalidArgument, where(),
        "thread " + std::to_string(mine >> 8) + " issued this while thread " + std::to_string(other >> 8) +
            " was still issuing " + opName(static_cast<OpType>(other & 0xff)) +
            " on the same group (debug.check_collectives checks this); nothing was sent",
        "a group takes its calls from one thread at a time: issue them from one thread, serialise the threads "
        "with a lock, or give each thread a group of its own (a subgroup)");
}

std::unique_ptr<ShadowOp> ProcessGroup::Impl::Call::startShadow(const Tensor& input, const Tensor* outputLike) const {
  ShadowOp::Target target{st.backends[shadowIndex].get(),
                          st.routes.backendNames()[backendIndex],
                          st.routes.backendNames()[shadowIndex],
                          shadowRoute->rtol,
                          shadowRoute->atol,
                          pg.shadows_,
                          pg.supervisor_};
  if (live) {
    target.live = pg.live_;
    target.liveKey = LiveKey{op, dtype_, liveReduceOp, 0, target.backendName, target.shadowName, st.tableBase};
  }
  return std::make_unique<ShadowOp>(std::move(target), ctx, bytes_, input, outputLike);
}

WorkPtr ProcessGroup::Impl::Call::supervise(WorkPtr work, const supervisor::OutputSpec& expect) {
  if (!pg.supervisor_) return work;
  pg.monitor_->inBackendCall.store(0, std::memory_order_relaxed);
  inBackend = false;
  const auto i = static_cast<size_t>(backendIndex);
  return pg.supervisor_->track(pg.monitor_, ctx, st.routes.backendNames()[i], st.generation, dtype_, bytes_, issued,
                               std::move(work), expect, i < st.recordNames.size() ? &st.recordNames[i] : nullptr);
}

}  // namespace commhost
