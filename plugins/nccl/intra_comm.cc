// SPDX-License-Identifier: Apache-2.0
#include "intra_comm.h"

#include <unistd.h>

#include <algorithm>
#include <new>
#include <random>
#include <thread>

#include "commhost/kernels/reduce.h"
#include "commhost/logging.h"
#include "commhost/sdk/backend_sdk.h"
#include "communicator.h"
#include "intra_setup.h"
#include "nvml_links.h"

namespace commhost::nccl_backend {

using kernels::IntraAlgo;
using kernels::IntraError;

namespace {

// Unique per process: the pid alone may repeat across PID namespaces on one host.
const std::string& processToken() {
  static const std::string token = [] {
    std::random_device rd;
    return std::to_string(::getpid()) + "-" + std::to_string(rd()) + std::to_string(rd());
  }();
  return token;
}

std::string cudaWhy(const char* call, cudaError_t e) {
  (void)cudaGetLastError();
  return std::string(call) + " failed: " + cudaGetErrorString(e);
}

RankInfo localInfo(int device) {
  RankInfo info;
  info.host = hostIdentity();
  info.process = processToken();
  char bus[64] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof(bus), device) == cudaSuccess) info.busId = normalizeBusId(bus);
  else (void)cudaGetLastError();
  if (cudaDeviceGetAttribute(&info.smCount, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    (void)cudaGetLastError();
    info.smCount = 1;
  }
  info.links = readNvLinks(info.busId, &info.nvmlWhy);
  return info;
}

// "" when `device` can map the memory of the device with `busId`.
std::string canAccess(int device, const std::string& busId) {
  int peer = -1;
  if (const cudaError_t e = cudaDeviceGetByPCIBusId(&peer, busId.c_str()); e != cudaSuccess) {
    (void)cudaGetLastError();
    return "that device is not visible to this process (CUDA_VISIBLE_DEVICES?)";
  }
  int can = 0;
  if (const cudaError_t e = cudaDeviceCanAccessPeer(&can, device, peer); e != cudaSuccess)
    return cudaWhy("cudaDeviceCanAccessPeer", e);
  return can ? "" : "cudaDeviceCanAccessPeer says no peer access between them";
}

// Why the topology rules intra out: the first rank without an NVML reading, else the shape.
std::string topologyReason(kernels::NvlTopology topology, const std::vector<RankInfo>& all) {
  if (topology == kernels::NvlTopology::HybridCubeMesh)
    return "the GPUs form a hybrid cube mesh, for which commhost has no kernels; NCCL serves it";
  for (size_t r = 0; r < all.size(); ++r)
    if (!all[r].links)
      return "the NVLink topology is unknown: rank " + std::to_string(r) + " read none (" + all[r].nvmlWhy + ")";
  return "the GPUs are not all linked to each other by NVLink (topology unknown)";
}

}  // namespace

std::shared_ptr<IntraComm> IntraComm::create(const Setup& s, std::string* why) {
  const BackendContext& ctx = *s.ctx;
  auto notUsed = [&](const std::string& reason) -> std::shared_ptr<IntraComm> {
    if (ctx.logger)
      ctx.logger->info("intra_node: not used for cuda:" + std::to_string(s.device) +
                       " (allreduce stays on NCCL): " + reason);
    if (why) *why = reason;
    return nullptr;
  };
  if (ctx.worldSize < 2 || ctx.worldSize > kernels::kIntraMaxRanks)
    return notUsed("2 to " + std::to_string(kernels::kIntraMaxRanks) + " ranks only, the group has " +
                   std::to_string(ctx.worldSize));
  DeviceGuard guard(s.device);

  // Phase 1: where every rank runs. Everything decided from these records alone (group,
  // topology, config) comes out the same on every rank without a further agreement.
  std::vector<RankInfo> all;
  for (const std::string& text :
       exchangeAll(ctx, s.key + "/info", encodeRankInfo(localInfo(s.device)), "intra_node setup"))
    all.push_back(decodeRankInfo(text));
  if (std::string reason = checkGroup(all); !reason.empty()) return notUsed(reason);
  std::vector<std::string> busIds, processes;
  std::vector<std::optional<std::vector<NvLinkEnd>>> links;
  int minSms = all[0].smCount;
  for (const RankInfo& r : all) {
    busIds.push_back(r.busId);
    processes.push_back(r.process);
    links.push_back(r.links);
    minSms = std::min(minSms, r.smCount);
  }
  const kernels::NvlTopology topology = kernels::detectTopology(nvlMeshFromLinks(busIds, links));
  if (topology != kernels::NvlTopology::FullyConnected) return notUsed(topologyReason(topology, all));
  const kernels::IntraConfig config = kernels::chooseIntraConfig(minSms, s.limits.bufferBytes);

  // Phase 2: this rank can map every peer and has its region; its handle goes to all.
  std::shared_ptr<IntraComm> self(new IntraComm(s, topology, config));
  std::string reason = checkAccess(all, ctx.rank, [&](const std::string& busId) { return canAccess(s.device, busId); });
  if (reason.empty()) reason = self->allocate();
  const Agreement ready = agree(ctx, s.key + "/ready", {reason.empty(), reason.empty() ? self->exportText() : reason});
  if (!ready.ok) return notUsed(ready.reason);

  // Phase 3: every rank mapped every peer.
  reason = self->openPeers(processes, busIds, ready.payloads);
  const Agreement open = agree(ctx, s.key + "/open", {reason.empty(), reason});
  if (!open.ok) return notUsed(open.reason);
  if (ctx.logger)
    ctx.logger->info("intra_node: cuda:" + std::to_string(s.device) + " runs one-shot allreduce up to " +
                     std::to_string(s.limits.oneShotMax) + " bytes and two-shot up to " +
                     std::to_string(std::min(s.limits.twoShotMax, s.limits.bufferBytes)) + " bytes (" +
                     kernels::nvlTopologyName(topology) + ", " + std::to_string(config.blocks) + " blocks of " +
                     std::to_string(config.threads) + " threads)");
  return self;
}

IntraComm::IntraComm(const Setup& s, kernels::NvlTopology topology, const kernels::IntraConfig& config)
    : ctx_(*s.ctx),
      device_(s.device),
      key_(s.key),
      limits_(s.limits),
      topology_(topology),
      config_(config),
      layout_(kernels::intraLayout(config)) {}

IntraComm::~IntraComm() { close(nullptr, false); }

std::string IntraComm::allocate() {
  void* region = nullptr;
  if (const cudaError_t e = cudaMalloc(&region, layout_.bytes); e != cudaSuccess)
    return cudaWhy("cudaMalloc of the intra_node region", e) + " (" + std::to_string(layout_.bytes) + " bytes)";
  regions_[ctx_.rank] = static_cast<uint8_t*>(region);
  // Counters start at 0; done before the handle is published, so no peer writes first.
  if (const cudaError_t e = cudaMemset(regions_[ctx_.rank] + layout_.posted, 0, layout_.flagBytes); e != cudaSuccess)
    return cudaWhy("cudaMemset", e);
  if (const cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) return cudaWhy("cudaDeviceSynchronize", e);
  void* words = nullptr;
  if (const cudaError_t e = cudaHostAlloc(&words, sizeof(HostWords), cudaHostAllocMapped | cudaHostAllocPortable);
      e != cudaSuccess)
    return cudaWhy("cudaHostAlloc", e);
  MutexLock lock(&mutex_);
  words_ = new (words) HostWords();
  void* dev = nullptr;
  if (const cudaError_t e = cudaHostGetDevicePointer(&dev, words, 0); e != cudaSuccess)
    return cudaWhy("cudaHostGetDevicePointer", e);
  devWords_ = static_cast<HostWords*>(dev);
  return "";
}

// "<IPC handle> <pointer>", both hex: peers in other processes open the handle, peers in
// this one use the pointer.
std::string IntraComm::exportText() const {
  cudaIpcMemHandle_t handle{};
  if (cudaIpcGetMemHandle(&handle, regions_[ctx_.rank]) != cudaSuccess) (void)cudaGetLastError();
  const auto ptr = reinterpret_cast<uintptr_t>(regions_[ctx_.rank]);
  return toHex(&handle, sizeof(handle)) + " " + toHex(&ptr, sizeof(ptr));
}

std::string IntraComm::openPeers(const std::vector<std::string>& process, const std::vector<std::string>& busIds,
                                 const std::vector<std::string>& payloads) {
  const int me = ctx_.rank;
  for (int p = 0; p < ctx_.worldSize; ++p) {
    if (p == me) continue;
    const std::string& text = payloads[static_cast<size_t>(p)];
    const size_t space = text.find(' ');
    cudaIpcMemHandle_t handle{};
    uintptr_t ptr = 0;
    if (space == std::string::npos || !fromHex(text.substr(0, space), &handle, sizeof(handle)) ||
        !fromHex(text.substr(space + 1), &ptr, sizeof(ptr)))
      return "rank " + std::to_string(p) + "'s region record is malformed";
    if (process[static_cast<size_t>(p)] == process[static_cast<size_t>(me)]) {
      // CUDA IPC refuses handles made in this process: map the peer directly instead.
      int peerDevice = -1;
      if (const cudaError_t e = cudaDeviceGetByPCIBusId(&peerDevice, busIds[static_cast<size_t>(p)].c_str());
          e != cudaSuccess)
        return cudaWhy("cudaDeviceGetByPCIBusId", e);
      const cudaError_t e = cudaDeviceEnablePeerAccess(peerDevice, 0);
      if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) return cudaWhy("cudaDeviceEnablePeerAccess", e);
      (void)cudaGetLastError();
      regions_[p] = reinterpret_cast<uint8_t*>(ptr);
      continue;
    }
    void* mapped = nullptr;
    if (const cudaError_t e = cudaIpcOpenMemHandle(&mapped, handle, cudaIpcMemLazyEnablePeerAccess); e != cudaSuccess)
      return cudaWhy("cudaIpcOpenMemHandle", e) + " (rank " + std::to_string(p) + ")";
    regions_[p] = static_cast<uint8_t*>(mapped);
    opened_[p] = true;
  }
  return "";
}

IntraAlgo IntraComm::select(size_t bytes, DType dtype, ReduceOp::Kind kind) const {
  return kernels::selectAllreduce(topology_, ctx_.worldSize, bytes, dtype, kind, limits_);
}

void IntraComm::checkUsable(const OpContext& op) {
  std::string why = launchFailure_;
  if (why.empty()) {
    MutexLock lock(&mutex_);
    if (closed_ || !words_) why = "the intra-node state was released";
    else if (__atomic_load_n(&words_->error.code, __ATOMIC_ACQUIRE) != kernels::kIntraOk)
      why = "an earlier intra-node allreduce failed";
  }
  if (!why.empty())
    raise(ErrorCode::Backend, ErrorContext::of(op), why + ", so the ranks' intra-node step counters no longer agree",
          "abort the group and create a new one (or set intra_node: false)");
}

int IntraComm::launch(void* data, size_t count, DType dtype, const ReduceOp& op, IntraAlgo algo,
                      std::chrono::milliseconds timeout, cudaStream_t stream, uint64_t* base) {
  kernels::IntraLaunch a;
  a.data = data;
  a.count = count;
  a.dtype = dtype;
  a.op = op.kind;
  a.factor = static_cast<float>(kernels::finalScale(op, ctx_.worldSize));
  a.algo = algo;
  a.rank = ctx_.rank;
  a.world = ctx_.worldSize;
  std::copy(std::begin(regions_), std::end(regions_), std::begin(a.regions));
  a.config = config_;
  a.layout = layout_;
  a.stepBase = steps_.take(algo);
  issued_.store(steps_.next(), std::memory_order_release);
  a.signature = kernels::intraSignature(count, dtype, op.kind, algo);
  a.timeoutNs = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(timeout).count());
  a.abortWord = &devWords_->abort;
  a.error = &devWords_->error;
  *base = a.stepBase;
  const int e = kernels::launchIntraAllreduce(a, stream);
  if (e != 0 && launchFailure_.empty())
    launchFailure_ = std::string("an intra-node kernel launch failed (") +
                     cudaGetErrorString(static_cast<cudaError_t>(e)) + ")";
  return e;
}

void IntraComm::verify(const OpContext& op, uint64_t base) {
  IntraError e;
  {
    MutexLock lock(&mutex_);
    if (closed_ || !words_) return;
    e.code = __atomic_load_n(&words_->error.code, __ATOMIC_ACQUIRE);
    if (e.code == kernels::kIntraOk) return;
    // Filled before `code` was stored (intra_allreduce.cu's record()).
    const volatile IntraError& w = words_->error;
    e.block = w.block;
    e.peer = w.peer;
    e.wait = w.wait;
    e.step = w.step;
    e.stepBase = w.stepBase;
    e.mine = w.mine;
    e.theirs = w.theirs;
  }
  if (e.stepBase > base) return;  // a later launch failed; this one had ended before it
  const std::string what = kernels::describeIntraError(e);
  const ErrorContext where = ErrorContext::of(op, e.peer);
  const std::string unusable =
      "the intra-node path of this communicator is unusable now: abort the group and "
      "create a new one";
  if (e.stepBase < base)
    raise(ErrorCode::Backend, where, "the intra-node allreduce did not run: an earlier one failed (" + what + ")",
          unusable);
  switch (e.code) {
    case kernels::kIntraMismatch:
      raise(ErrorCode::InvalidArgument, where, "the intra-node allreduce failed: " + what,
            "every rank must allreduce the same number of elements of the same dtype with the same op; " + unusable);
    case kernels::kIntraTimeout:
      raise(ErrorCode::Timeout, where, "the intra-node allreduce failed: " + what,
            "a peer may be missing this collective or be slow: check every rank issues the same ops in the same "
            "order, or raise the timeout; " +
                unusable);
    case kernels::kIntraAborted:
      raise(ErrorCode::Aborted, where, "the intra-node allreduce was aborted: " + what,
            "create a new group to continue");
    default: break;
  }
  raise(ErrorCode::Backend, where, "the intra-node allreduce failed: " + what, unusable);
}

void IntraComm::abort() {
  MutexLock lock(&mutex_);
  if (!closed_ && words_) __atomic_store_n(&words_->abort, 1u, __ATOMIC_RELEASE);
}

void IntraComm::close(cudaStream_t stream, bool clean) {
  {
    MutexLock lock(&mutex_);
    if (closed_) return;
    clean = clean && words_ && __atomic_load_n(&words_->error.code, __ATOMIC_ACQUIRE) == kernels::kIntraOk;
  }
  abort();  // a kernel still waiting on a peer ends now; ended ones are unaffected
  DeviceGuard guard(device_);
  if (stream && cudaStreamSynchronize(stream) != cudaSuccess) (void)cudaGetLastError();
  if (clean && stream && !awaitPeersDone(stream))
    if (ctx_.logger)
      ctx_.logger->warn("intra_node: freeing cuda:" + std::to_string(device_) +
                        "'s region although a peer had not finished reading it within " +
                        std::to_string(ctx_.timeout.count()) + " ms");
  MutexLock lock(&mutex_);
  release();
}

// Peers read this rank's slots until their kernels end their last step, and say so in this
// rank's consumed counters: once every block of every peer reached the last step issued,
// nothing reads or writes the region any more. Read on this rank's own memory, so it needs
// nothing from the peers' hosts (they may be shutting down one after another).
bool IntraComm::awaitPeersDone(cudaStream_t stream) {
  const uint64_t last = issued_.load(std::memory_order_acquire);
  const size_t n = static_cast<size_t>(config_.blocks) * kernels::kIntraMaxRanks;
  std::vector<uint64_t> consumed(n);
  const auto deadline = std::chrono::steady_clock::now() + ctx_.timeout;
  for (;;) {
    if (cudaMemcpyAsync(consumed.data(), regions_[ctx_.rank] + layout_.consumed, n * sizeof(uint64_t),
                        cudaMemcpyDeviceToHost, stream) != cudaSuccess ||
        cudaStreamSynchronize(stream) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    bool done = true;
    for (size_t i = 0; i < n && done; ++i)
      if (static_cast<int>(i % kernels::kIntraMaxRanks) < ctx_.worldSize &&
          static_cast<int>(i % kernels::kIntraMaxRanks) != ctx_.rank)
        done = consumed[i] >= last;
    if (done) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

void IntraComm::release() {
  if (closed_) return;
  closed_ = true;
  for (int p = 0; p < kernels::kIntraMaxRanks; ++p)
    if (opened_[p] && cudaIpcCloseMemHandle(regions_[p]) != cudaSuccess) (void)cudaGetLastError();
  if (regions_[ctx_.rank] && cudaFree(regions_[ctx_.rank]) != cudaSuccess) (void)cudaGetLastError();
  if (words_ && cudaFreeHost(words_) != cudaSuccess) (void)cudaGetLastError();
  words_ = nullptr;
  std::fill(std::begin(regions_), std::end(regions_), nullptr);
}

}  // namespace commhost::nccl_backend
