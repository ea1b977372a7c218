// SPDX-License-Identifier: Apache-2.0
// The hier backend's lifecycle: manifest, options, the topology and parts it is built
// from, the capabilities every rank agrees on, one step of an op, abort and shutdown.
#include <sstream>

#include "commhost/backend_sdk.h"
#include "commhost/errors.h"
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
              "0: ranks that share a host (hostname and boot id) form a level-one group; N: blocks of N "
              "consecutive ranks do (e.g. one per NUMA node, or to try the hierarchy on one machine)",
              {0, 1 << 20});
}

void Options::validate() const {
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
  if (options.groupSize > 0) topo_ = Topology::fromBlocks(ctx.worldSize, options.groupSize);
  else topo_ = Topology::fromIdentities(exchangeAll(ctx, "host", hostIdentity(), "hier rendezvous"));
  host_ = topo_.hostOf[static_cast<size_t>(ctx.rank)];
  local_ = topo_.localIndex[static_cast<size_t>(ctx.rank)];

  // Every rank creates its host's part first, then the leaders theirs: each creation
  // waits only for ranks that make the same call.
  intra_ = {"intra",
            options.intra,
            nullptr,
            topo_.hosts[static_cast<size_t>(host_)],
            ctx.groupName + "/intra" + std::to_string(host_),
            local_};
  if (intra_.members.size() > 1)
    intra_.backend = ctx.makeBackend(options.intra, intra_.members, "intra" + std::to_string(host_));
  inter_ = {"inter", options.inter, nullptr, topo_.leaders(), ctx.groupName + "/inter", host_};
  if (local_ == 0 && topo_.numHosts() > 1) inter_.backend = ctx.makeBackend(options.inter, inter_.members, "inter");
  agreeCapabilities();

  WorkQueue::Hooks hooks;
  hooks.beforeEach = [this](const OpContext& op) { deadline_ = std::chrono::steady_clock::now() + op.timeout; };
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
    std::vector<OpType> intra, inter;
  };
  const std::vector<Need> needs = {
      {OpType::Allreduce, {intraReduce_, OpType::Broadcast}, {OpType::Allreduce}},
      {OpType::AllreduceCoalesced, {intraReduce_, OpType::Broadcast}, {OpType::Allreduce}},
      {OpType::Broadcast, {OpType::Broadcast}, {OpType::Broadcast}},
      {OpType::Allgather,
       oneHost ? std::vector<OpType>{OpType::AllgatherIntoTensor}
               : std::vector<OpType>{OpType::Gather, OpType::Broadcast},
       {OpType::AllgatherIntoTensor}},
      {OpType::AllgatherIntoTensor,
       oneHost ? std::vector<OpType>{OpType::AllgatherIntoTensor}
               : std::vector<OpType>{OpType::Gather, OpType::Broadcast},
       {OpType::AllgatherIntoTensor}},
      {OpType::ReduceScatter, {intraReduce_, OpType::Scatter}, {OpType::ReduceScatterTensor}},
      {OpType::ReduceScatterTensor, {intraReduce_, OpType::Scatter}, {OpType::ReduceScatterTensor}},
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
  // Avg and PreMulSum run as sums in the parts, scaled here.
  EnumSet<ReduceOp::Kind> kinds;
  for (int k = 0; k < ReduceOp::kNumKinds; ++k) {
    const auto kind = static_cast<ReduceOp::Kind>(k);
    const auto stepKind = (kind == ReduceOp::Avg || kind == ReduceOp::PreMulSum) ? ReduceOp::Sum : kind;
    if (in.reduceOps.has(stepKind) && out.reduceOps.has(stepKind)) kinds.add(kind);
  }
  caps_.reduceOps = kinds;
}

void HierBackend::require(const OpContext& op) const {
  if (caps_.ops.has(op.op)) return;
  raise(ErrorCode::NotSupported, ErrorContext::of(op),
        "backend '" + backendName() + "' (hier) cannot build " + opName(op.op) + ": " + missing_,
        "route " + std::string(opName(op.op)) + " to another backend in the config, or give hier parts that serve it");
}

void HierBackend::step(Part& part, OpType op, const OpContext& parent, const Issue& issue) {
  OpContext sub;
  sub.op = op;
  sub.seq = ++part.seq;
  sub.group = part.group;
  sub.rank = part.rank;
  sub.stream = parent.stream;
  const auto left = std::chrono::duration_cast<Millis>(deadline_ - std::chrono::steady_clock::now());
  sub.timeout = std::max(Millis(1), left);
  try {
    issue(*part.backend, sub)->wait(sub.timeout);
  } catch (const Error& e) {
    ErrorContext where = ErrorContext::of(parent);
    const int subPeer = e.where().peer;
    std::string peer;
    if (subPeer >= 0 && subPeer < static_cast<int>(part.members.size())) {
      where.peer = part.members[static_cast<size_t>(subPeer)];
      peer = " (its peer " + std::to_string(subPeer) + " is rank " + std::to_string(where.peer) + " here)";
    }
    rethrowAs(e.code(),
              where.format() + "step " + opName(op) + " on " + part.role + " backend '" + part.backendName +
                  "' (group " + part.group + " of ranks " + rankList(part.members) + ") failed" + peer + ": " +
                  e.what(),
              where);
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

// The queue fails the works in flight; the parts end the step the worker waits on.
void HierBackend::abort(const std::string& reason) {
  queue_->abort(reason);
  for (Part* p : {&intra_, &inter_})
    if (p->active()) p->backend->abort(reason);
}

void HierBackend::shutdown() {
  queue_->drain();
  for (Part* p : {&intra_, &inter_})
    if (p->active()) p->backend->shutdown();
}

}  // namespace commhost::hier
