// SPDX-License-Identifier: Apache-2.0
// The hier backend's lifecycle: manifest, options, the topology and parts it is built
// from, the capabilities every rank agrees on, one step of an op, abort and shutdown.
#include <sstream>

#include "commhost/errors.h"
#include "commhost/sdk/backend_sdk.h"
#include "hier_backend.h"

namespace commhost::hier {

const Capabilities& capabilities() {
  static const Capabilities caps{
      {OpType::Allreduce, OpType::AllreduceCoalesced, OpType::Broadcast, OpType::Allgather, OpType::AllgatherIntoTensor,
       OpType::ReduceScatter, OpType::ReduceScatterTensor, OpType::Barrier},
      Capabilities::allDTypes(),
      Capabilities::allReduceOps(),
      {DeviceType::CPU},
      {Feature::Split, Feature::MultiProcess, Feature::MultiHost}};
  return caps;
}

OptionSchema<Options> Options::schema() {
  return OptionSchema<Options>()
      .option("intra", &Options::intra, "shm",
              "The backend (a name under `backends:`) that serves the ranks of one host; it need not serve ops "
              "of its own in `routes:`")
      .option("inter", &Options::inter, "gloo",
              "The backend that serves one leader per host (each host's lowest rank); it must reach across hosts")
      .option("group_size", &Options::groupSize, "0",
              "0: ranks that share a host (hostname and boot id) form a level-one group; N: groups of N ranks "
              "do (e.g. one per NUMA node, or to try the hierarchy on one machine)",
              {0, 1 << 20})
      .option("round_robin", &Options::roundRobin, "false",
              "With group_size N: rank r joins group r mod ceil(world / N) (ranks placed round-robin, as "
              "`mpirun --map-by node` does) instead of the block of ranks [kN, kN + N)");
}

void Options::validate() const {
  if (roundRobin && groupSize == 0)
    refuseOption("round_robin", "needs group_size", "set group_size to the ranks per group");
  if (intra.empty()) refuseOption("intra", "is empty", "name a backend configured under `backends:` (e.g. shm)");
  if (inter.empty()) refuseOption("inter", "is empty", "name a backend configured under `backends:` (e.g. gloo)");
}

std::unique_ptr<Backend> create(const Options& options, const BackendContext& ctx) {
  if (!ctx.makeBackend)
    raise(ErrorCode::Plugin, ErrorContext::of(ctx, "hier rendezvous"),
          "this host does not create sub-backends (BackendContext::makeBackend is unset)",
          "run the hier plugin in the commhost it was built with");
  return std::make_unique<HierBackend>(options, ctx);
}

namespace {

// A capability set as text and back, for the agreement through the store.
std::string bitsOf(const Capabilities& c) {
  return std::to_string(c.ops.bits()) + " " + std::to_string(c.dtypes.bits()) + " " +
         std::to_string(c.reduceOps.bits());
}
template <class E> EnumSet<E> setOf(uint64_t bits) {
  EnumSet<E> s;
  for (unsigned i = 0; i < 64; ++i)
    if (bits & (1ull << i)) s.add(static_cast<E>(i));
  return s;
}

// A part's capabilities, or no constraint where this rank takes no part.
Capabilities partCaps(const Part& p) {
  if (p.active()) return p.backend->capabilities();
  return {EnumSet<OpType>::all(64), EnumSet<DType>::all(64), EnumSet<ReduceOp::Kind>::all(64), {}, {}};
}

std::string rankList(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : " ") + std::to_string(r);
  return out;
}

}  // namespace

HierBackend::HierBackend(const Options& options, const BackendContext& ctx) : ctx_(ctx) {
  ctx_.makeBackend = nullptr;  // it refers to the factory call's frame
  if (options.groupSize > 0)
    topo_ = options.roundRobin ? Topology::fromRoundRobin(ctx.worldSize, options.groupSize)
                               : Topology::fromBlocks(ctx.worldSize, options.groupSize);
  else topo_ = Topology::fromIdentities(exchangeAll(ctx, "host", hostIdentity(), "hier rendezvous"));
  host_ = topo_.hostOf[static_cast<size_t>(ctx.rank)];
  local_ = topo_.localIndex[static_cast<size_t>(ctx.rank)];

  // Every rank creates its host's part first, then the leaders theirs: each creation
  // waits only for ranks that make the same call. A rank whose part fails publishes why
  // instead of its capabilities and throws at once; the others stop waiting as soon as
  // they read it (they would otherwise wait for it until the timeout).
  intra_ = {"intra",
            options.intra,
            nullptr,
            topo_.hosts[static_cast<size_t>(host_)],
            ctx.groupName + "/intra" + std::to_string(host_),
            local_};
  inter_ = {"inter", options.inter, nullptr, topo_.leaders(), ctx.groupName + "/inter", host_};
  std::exception_ptr failed;
  try {
    if (intra_.members.size() > 1)
      intra_.backend = ctx.makeBackend(options.intra, intra_.members, "intra" + std::to_string(host_));
    if (local_ == 0 && topo_.numHosts() > 1) inter_.backend = ctx.makeBackend(options.inter, inter_.members, "inter");
  } catch (const std::exception& e) {
    failed = std::current_exception();
    publishFailure(ctx, "caps", std::string("could not create its part: ") + e.what());
  }
  if (failed) std::rethrow_exception(failed);
  agreeCapabilities();

  WorkQueue::Hooks hooks;
  hooks.beforeEach = [this](const OpContext& op) {
    if (!broken_.empty())
      raise(ErrorCode::Backend, ErrorContext::of(op),
            "backend '" + ctx_.backendName + "' (hier) is unusable: an earlier step failed (" + broken_ + ")",
            "destroy this group and create a new one");
    deadline_ = std::chrono::steady_clock::now() + op.timeout;
  };
  hooks.describe = [this](const OpContext& op, const std::exception_ptr& e) { return describe(op, e); };
  queue_ = std::make_unique<WorkQueue>("hier backend", 1, hooks);
  if (ctx.logger && ctx.rank == 0)
    ctx.logger->info("hier backend '" + ctx.backendName + "': " + topo_.describe() + "; intra '" + options.intra +
                     "', inter '" + options.inter + "'" + (missing_.empty() ? "" : "; " + missing_));
}

HierBackend::~HierBackend() { queue_.reset(); }

// Ranks see different parts (only leaders have `inter`), so each publishes what its parts
// serve and every rank takes the same intersection: an op is then refused on every rank
// alike, never by the leaders while the others wait.
void HierBackend::agreeCapabilities() {
  const std::string mine = bitsOf(partCaps(intra_)) + " " + bitsOf(partCaps(inter_));
  Capabilities in{EnumSet<OpType>::all(64), EnumSet<DType>::all(64), EnumSet<ReduceOp::Kind>::all(64), {}, {}};
  Capabilities out = in;
  for (const std::string& theirs : exchangeAll(ctx_, "caps", mine, "hier rendezvous")) {
    std::istringstream s(theirs);
    uint64_t b[6] = {};
    for (auto& x : b) s >> x;
    in.ops = setOf<OpType>(in.ops.bits() & b[0]);
    in.dtypes = setOf<DType>(in.dtypes.bits() & b[1]);
    in.reduceOps = setOf<ReduceOp::Kind>(in.reduceOps.bits() & b[2]);
    out.ops = setOf<OpType>(out.ops.bits() & b[3]);
    out.dtypes = setOf<DType>(out.dtypes.bits() & b[4]);
    out.reduceOps = setOf<ReduceOp::Kind>(out.reduceOps.bits() & b[5]);
  }
  intraReduce_ = in.ops.has(OpType::Reduce) ? OpType::Reduce : OpType::Allreduce;
  const bool oneHost = topo_.numHosts() == 1;
  struct Need {
    OpType op;
    std::vector<OpType> intra, inter;  // steps of each part
  };
  // Each op's variants (coalesced, into tensor, list) need the same steps as the op.
  using Steps = std::vector<OpType>;
  const Steps allreduceIntra = oneHost ? Steps{OpType::Allreduce} : Steps{intraReduce_, OpType::Broadcast};
  const Steps allgatherIntra = oneHost ? Steps{OpType::AllgatherIntoTensor} : Steps{OpType::Gather, OpType::Broadcast};
  const Steps reduceScatterIntra = oneHost ? Steps{OpType::ReduceScatterTensor} : Steps{intraReduce_, OpType::Scatter};
  const std::vector<Need> needs = {
      {OpType::Allreduce, allreduceIntra, {OpType::Allreduce}},
      {OpType::AllreduceCoalesced, allreduceIntra, {OpType::Allreduce}},
      {OpType::Broadcast, {OpType::Broadcast}, {OpType::Broadcast}},
      {OpType::Allgather, allgatherIntra, {OpType::AllgatherIntoTensor}},
      {OpType::AllgatherIntoTensor, allgatherIntra, {OpType::AllgatherIntoTensor}},
      {OpType::ReduceScatter, reduceScatterIntra, {OpType::ReduceScatterTensor}},
      {OpType::ReduceScatterTensor, reduceScatterIntra, {OpType::ReduceScatterTensor}},
      {OpType::Barrier, {OpType::Barrier}, {OpType::Barrier}},
  };
  caps_ = hier::capabilities();  // the manifest (not the member of the same name)
  for (const Need& n : needs) {
    std::string lacks;
    for (OpType s : n.intra)
      if (!in.ops.has(s))
        lacks += std::string(lacks.empty() ? "" : ", ") + "intra '" + intra_.backendName + "' lacks " + opName(s);
    for (OpType s : n.inter)
      if (!out.ops.has(s))
        lacks += std::string(lacks.empty() ? "" : ", ") + "inter '" + inter_.backendName + "' lacks " + opName(s);
    if (lacks.empty()) continue;
    caps_.ops.remove(n.op);
    missing_ += std::string(missing_.empty() ? "" : "; ") + opName(n.op) + " unavailable (" + lacks + ")";
  }
  caps_.dtypes = setOf<DType>(caps_.dtypes.bits() & in.dtypes.bits() & out.dtypes.bits());
  // Avg and PreMulSum run as sums in the parts, scaled here (on one host the intra part
  // runs them itself).
  EnumSet<ReduceOp::Kind> kinds;
  for (int k = 0; k < ReduceOp::kNumKinds; ++k) {
    const auto kind = static_cast<ReduceOp::Kind>(k);
    const bool asSum = !oneHost && (kind == ReduceOp::Avg || kind == ReduceOp::PreMulSum);
    const auto stepKind = asSum ? ReduceOp::Sum : kind;
    if (in.reduceOps.has(stepKind) && out.reduceOps.has(stepKind)) kinds.add(kind);
  }
  caps_.reduceOps = kinds;
}

void HierBackend::require(const OpContext& op) const {
  if (caps_.ops.has(op.op)) return;
  raise(ErrorCode::NotSupported, ErrorContext::of(op),
        "backend '" + ctx_.backendName + "' (hier) cannot build " + opName(op.op) + ": " + missing_,
        "route " + std::string(opName(op.op)) + " to another backend in the config, or give hier parts that serve it");
}

void HierBackend::step(Part& part, OpType op, const OpContext& parent, const Issue& issue) {
  OpContext sub;
  sub.op = op;
  sub.seq = ++part.seq;
  sub.group = part.group;
  sub.rank = part.rank;
  sub.stream = parent.stream;
  // The part gets a little less than the op's remaining time, so that its own error
  // (which may name the missing peer) ends the op before the caller's wait does; a part
  // still running a little after its deadline is aborted below.
  const auto left = std::chrono::duration_cast<Millis>(deadline_ - std::chrono::steady_clock::now());
  const Millis margin = std::min(Millis(1000), std::max(Millis(10), left / 10));
  sub.timeout = std::max(Millis(1), left - margin);
  const Millis grace = margin / 2;
  ErrorContext where = ErrorContext::of(parent);
  const std::string what = "step " + std::string(opName(op)) + " on " + part.role + " backend '" + part.backendName +
                           "' (group " + part.group + " of ranks " + rankList(part.members) + ")";
  try {
    if (aborted_.load(std::memory_order_acquire)) raise(ErrorCode::Aborted, where, what + " not started: aborted");
    WorkPtr work = issue(*part.backend, sub);
    try {
      work->wait(sub.timeout + grace);
    } catch (const TimeoutError&) {
      if (work->isCompleted()) throw;
      // Still running past its own deadline: stop it, so it no longer writes into the
      // caller's tensors once this op has failed.
      part.backend->abort("hier: " + what + " outlived its timeout");
      throw;
    }
    if (aborted_.load(std::memory_order_acquire)) raise(ErrorCode::Aborted, where, what + " ended: aborted");
  } catch (const std::exception& e) {
    // The parts' step counters may now disagree across ranks: nothing more may run.
    const Error* err = dynamic_cast<const Error*>(&e);
    const ErrorCode code = err ? err->code() : ErrorCode::Backend;
    if (code != ErrorCode::InvalidArgument && broken_.empty()) broken_ = e.what();
    const int subPeer = err ? err->where().peer : -1;
    std::string peer;
    if (subPeer >= 0 && subPeer < static_cast<int>(part.members.size())) {
      where.peer = part.members[static_cast<size_t>(subPeer)];
      peer = " (its peer " + std::to_string(subPeer) + " is rank " + std::to_string(where.peer) + " here)";
    }
    rethrowAs(code, where.format() + what + " failed" + peer + ": " + e.what(), where);
  }
}

std::exception_ptr HierBackend::describe(const OpContext& op, std::exception_ptr error) const {
  try {
    std::rethrow_exception(error);
  } catch (const Error&) {
    return error;  // step() already put it in this group's terms
  } catch (const std::exception& e) {
    return std::make_exception_ptr(
        BackendError(ErrorContext::of(op).format() + "(hier) " + e.what(), ErrorContext::of(op)));
  } catch (...) {
    return std::make_exception_ptr(
        BackendError(ErrorContext::of(op).format() + "(hier) an unknown exception", ErrorContext::of(op)));
  }
}

// The flag first (the worker checks it around each step, so it stops writing into the
// caller's tensors), then the parts (ending the step the worker waits on), then the
// queue (failing the works, which releases their callers).
void HierBackend::abort(const std::string& reason) {
  aborted_.store(true, std::memory_order_release);
  for (Part* p : {&intra_, &inter_})
    if (p->active()) p->backend->abort(reason);
  queue_->abort(reason);
}

void HierBackend::shutdown() {
  queue_->drain();
  for (Part* p : {&intra_, &inter_})
    if (p->active()) p->backend->shutdown();
}

}  // namespace commhost::hier
