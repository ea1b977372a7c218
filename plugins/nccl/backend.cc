// SPDX-License-Identifier: Apache-2.0
// The nccl backend's lifecycle: devices' communicators and streams, the op runner (events,
// NaN check, watchdog), abort and shutdown.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "commhost/kernels/nan_check.h"
#include "commhost/sdk/backend_sdk.h"
#include "nccl_backend.h"
#include "split.h"

namespace commhost::nccl_backend {

using Clock = std::chrono::steady_clock;

namespace {

[[noreturn]] void cudaFailed(const ErrorContext& where, const char* call, cudaError_t e) {
  (void)cudaGetLastError();
  raise(ErrorCode::Backend, where, std::string(call) + " failed: " + cudaGetErrorString(e),
        "check the device is healthy (nvidia-smi) and the tensors live on it");
}

#define CUDA_CHECK(where, call)                          \
  do {                                                   \
    const cudaError_t e_ = (call);                       \
    if (e_ != cudaSuccess) cudaFailed(where, #call, e_); \
  } while (0)

}  // namespace

std::unique_ptr<Backend> create(const Options& options, const BackendContext& ctx) {
  return std::make_unique<NcclBackend>(options, ctx);
}

NcclBackend::NcclBackend(const Options& options, const BackendContext& ctx, IdSource idSource)
    : ctx_(ctx), options_(options), idSource_(std::move(idSource)) {
  if (!idSource_) idSource_ = ncclIdSource(ErrorContext::of(ctx, "nccl init"));
  {
    MutexLock lock(&shutdownMutex_);
    watchdog_ = std::make_unique<Watchdog>();
  }
  if (ctx_.splitFrom) {
    // The parent's prepareSplit() made this subgroup's communicator on one device (the
    // same plugin made it, so the type is known). Not kept in ctx_: devices_ owns it now.
    const auto split = std::static_pointer_cast<SplitComm>(ctx_.splitFrom);
    ctx_.splitFrom.reset();
    const ErrorContext where = ErrorContext::of(ctx, "nccl init");
    if (split->rank != ctx.rank || split->comm->size() != ctx.worldSize)
      raise(ErrorCode::Backend, where,
            "the communicator split for this subgroup has rank " + std::to_string(split->rank) + " of " +
                std::to_string(split->comm->size()) + ", the group rank " + std::to_string(ctx.rank) + " of " +
                std::to_string(ctx.worldSize),
            "report it to commhost's developers");
    addDevice(where, split->device, split->comm);
  }
  if (options_.eagerInit) {
    OpContext op;
    op.group = ctx.groupName;
    op.rank = ctx.rank;
    op.timeout = ctx.timeout;
    deviceState(op, currentDevice(op));
  }
}

NcclBackend::~NcclBackend() { shutdown(); }

int NcclBackend::currentDevice(const OpContext& op) const {
  int device = 0;
  CUDA_CHECK(ErrorContext::of(op), cudaGetDevice(&device));
  return device;
}

NcclBackend::DeviceState& NcclBackend::deviceState(const OpContext& op, int device) {
  {
    MutexLock lock(&mutex_);
    auto it = devices_.find(device);
    if (it != devices_.end()) return it->second;
  }
  // Created outside the lock: the exchange waits on peers, and abort() must not wait for it.
  const ErrorContext where = ErrorContext::of(op);
  DeviceGuard guard(device);
  Communicator::Setup setup;
  setup.device = device;
  setup.ordinal = created_++;
  setup.rank = ctx_.rank;
  setup.worldSize = ctx_.worldSize;
  setup.store = ctx_.store.get();
  setup.timeout = initTimeout(options_, ctx_.timeout);
  setup.options = &options_;
  setup.idSource = idSource_;
  setup.where = where;
  return addDevice(where, device, Communicator::create(setup));
}

NcclBackend::DeviceState& NcclBackend::addDevice(const ErrorContext& where, int device,
                                                 std::shared_ptr<Communicator> comm) {
  DeviceGuard guard(device);
  DeviceState state;
  // Until the state is stored, a failure below frees what was made so far.
  struct Release {
    DeviceState* state;
    ~Release() {
      if (!state) return;
      if (state->stream) cudaStreamDestroy(state->stream);
      if (state->barrierBuf) cudaFree(state->barrierBuf);
      if (state->nanFlag) cudaFree(state->nanFlag);
    }
  } release{&state};
  state.comm = std::move(comm);
  // The communicator's id is alike on all its ranks (fresh or split), so it names the setup.
  if (options_.intraNode) state.intra = IntraComm::create({&ctx_, device, "nccl_intra/" + state.comm->id(), {}});
  int least = 0, greatest = 0;
  CUDA_CHECK(where, cudaDeviceGetStreamPriorityRange(&least, &greatest));
  CUDA_CHECK(where, cudaStreamCreateWithPriority(&state.stream, cudaStreamNonBlocking,
                                                 options_.highPriorityStream ? greatest : least));
  CUDA_CHECK(where, cudaMalloc(reinterpret_cast<void**>(&state.barrierBuf), sizeof(float)));
  if (options_.nanCheck) CUDA_CHECK(where, cudaMalloc(reinterpret_cast<void**>(&state.nanFlag), sizeof(int)));
  MutexLock lock(&mutex_);
  if (aborted_.load()) {
    state.comm->abort();
    raise(ErrorCode::Aborted, where, "the backend was aborted while the communicator was being created",
          "create a new group to continue");
  }
  DeviceState& stored = devices_.emplace(device, state).first->second;
  release.state = nullptr;
  return stored;
}

std::shared_ptr<Communicator> NcclBackend::liveComm(int device) {
  std::shared_ptr<Communicator> comm;
  {
    MutexLock lock(&mutex_);
    const auto it = devices_.find(device);
    if (it == devices_.end()) return nullptr;
    comm = it->second.comm;
  }
  // Outside the lock, as abort() does: asyncError() takes the communicator's own lock.
  if (comm->aborted() || comm->asyncError() != ncclSuccess) return nullptr;
  return comm;
}

std::shared_ptr<void> NcclBackend::prepareSplit(const SplitRequest& request) {
  const ErrorContext where{ctx_.groupName, ctx_.rank, request.op};
  int device = -1;
  std::shared_ptr<Communicator> parent;
  SplitCall call;
  try {
    call = splitCall(request, where);
    bool any = false;
    {
      MutexLock lock(&mutex_);
      any = !devices_.empty();
    }
    // Without any communicator there is nothing to split, and no device to ask about.
    if (any && !aborted_.load() && !closed_.load()) {
      CUDA_CHECK(where, cudaGetDevice(&device));
      parent = liveComm(device);
    }
  } catch (const Error& e) {
    // The others' vote ends at once naming this rank, instead of at the timeout.
    publishFailure(ctx_, splitKey(request.round), std::string("could not vote: ") + e.what());
    throw;
  }
  const std::string agreed = agreeOnSplit(ctx_, request.round, request.op, parent ? parent->id() : std::string());
  if (agreed.empty()) return nullptr;  // no rank splits: the members create fresh communicators
  auto child = parent->split(call.color, call.key, options_, splitChildId(request.round, call.color),
                             Clock::now() + initTimeout(options_, ctx_.timeout), where);
  if (!child) return nullptr;  // in no subgroup of this round
  if (const std::string wrong = splitMismatch(request, child->rank(), child->size()); !wrong.empty()) {
    child->abort();
    raise(ErrorCode::Backend, where, wrong, "report it with NCCL_DEBUG=INFO output to commhost's developers");
  }
  auto prepared = std::make_shared<SplitComm>();
  prepared->device = device;
  prepared->rank = request.rank;
  prepared->comm = std::move(child);
  return prepared;
}

void NcclBackend::checkNan(const OpContext& op, DeviceState& state, const std::vector<Tensor>& inputs) {
  const ErrorContext where = ErrorContext::of(op);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (!kernels::canHoldNan(t.dtype()) || t.numel() == 0) continue;
    CUDA_CHECK(where, cudaMemsetAsync(state.nanFlag, 0, sizeof(int), state.stream));
    const int launched = kernels::launchNanCheck(t.data(), t.numel(), t.dtype(), state.nanFlag, state.stream);
    if (launched != 0) cudaFailed(where, "the NaN check kernel launch", static_cast<cudaError_t>(launched));
    int found = 0;
    // A debugging option: the CPU waits for the check (and so for the caller's stream).
    CUDA_CHECK(where, cudaMemcpyAsync(&found, state.nanFlag, sizeof(int), cudaMemcpyDeviceToHost, state.stream));
    CUDA_CHECK(where, cudaStreamSynchronize(state.stream));
    if (found)
      raise(ErrorCode::InvalidArgument, where,
            "input tensor " + std::to_string(i) + " (" + t.str() + ") holds NaN (nan_check is on)",
            "find where the NaN comes from before this op (a diverging loss, a bad input), or turn nan_check off");
  }
}

WorkPtr NcclBackend::run(const OpContext& op, Op desc, const Calls& calls) {
  const ErrorContext where = ErrorContext::of(op);
  if (aborted_.load(std::memory_order_acquire))
    raise(ErrorCode::Aborted, where, "the nccl backend was aborted", "create a new group to continue");
  if (closed_.load(std::memory_order_acquire))
    raise(ErrorCode::Aborted, where, "the nccl backend was shut down", "create a new group to continue");
  DeviceState& state = deviceState(op, desc.device);
  DeviceGuard guard(desc.device);
  // Timing (enable_timing) only where asked: a timed event costs more to record.
  const bool timed = options_.enableTiming;
  const unsigned endFlags = timed ? cudaEventDefault : cudaEventDisableTiming;
  cudaEvent_t start = nullptr, timedStart = nullptr, end = nullptr;
  CUDA_CHECK(where, cudaEventCreateWithFlags(&start, cudaEventDisableTiming));
  cudaError_t created = cudaEventCreateWithFlags(&end, endFlags);
  if (created == cudaSuccess && timed) created = cudaEventCreateWithFlags(&timedStart, cudaEventDefault);
  if (created != cudaSuccess) {
    cudaEventDestroy(start);
    if (end) cudaEventDestroy(end);
    cudaFailed(where, "cudaEventCreateWithFlags", created);
  }
  // The work owns the events from here, so an error below destroys them with it.
  auto work = std::make_shared<NcclWork>(op, state.comm, start, timedStart, end, options_.blockingWait || desc.blocking,
                                         std::move(desc.keep), std::move(desc.outputs));
  work->setHooks(std::move(desc.hooks));
  // The NCCL stream runs after whatever the caller queued on its own stream so far.
  CUDA_CHECK(where, cudaEventRecord(start, static_cast<cudaStream_t>(op.stream)));
  CUDA_CHECK(where, cudaStreamWaitEvent(state.stream, start, 0));
  if (options_.nanCheck) checkNan(op, state, desc.nanInputs);
  // The timed span is the NCCL calls alone: after the wait for the caller and the check.
  if (timed) CUDA_CHECK(where, cudaEventRecord(timedStart, state.stream));
  cudaStream_t stream = state.stream;
  state.comm->enqueue([&](ncclComm_t comm) { return calls(comm, stream); }, Clock::now() + op.timeout, where);
  CUDA_CHECK(where, cudaEventRecord(end, state.stream));
  {
    MutexLock lock(&shutdownMutex_);
    if (watchdog_) watchdog_->add(work);
  }
  return work;
}

ncclRedOp_t NcclBackend::redOp(const ReduceOp& op, DType dtype, ncclComm_t comm, bool* created) {
  *created = false;
  if (auto builtin = builtinRedOp(op.kind, dtype)) return *builtin;
  // PreMulSum: the factor in the tensor's own type, read by NCCL when the call is made
  // (ncclScalarHostImmediate), so the locals below may go out of scope after it.
  const ncclDataType_t type = *toNccl(dtype);
  ncclRedOp_t out = ncclSum;
  union {
    __half h;
    __nv_bfloat16 b;
    float f;
    double d;
    int8_t i8;
    uint8_t u8;
    int32_t i32;
    int64_t i64;
  } scalar{};
  switch (dtype) {
    case DType::Float16: scalar.h = __float2half(static_cast<float>(op.factor)); break;
    case DType::BFloat16: scalar.b = __float2bfloat16(static_cast<float>(op.factor)); break;
    case DType::Float32: scalar.f = static_cast<float>(op.factor); break;
    case DType::Float64: scalar.d = op.factor; break;
    case DType::Int8: scalar.i8 = static_cast<int8_t>(op.factor); break;
    case DType::Bool:
    case DType::UInt8: scalar.u8 = static_cast<uint8_t>(op.factor); break;
    case DType::Int32: scalar.i32 = static_cast<int32_t>(op.factor); break;
    case DType::Int64: scalar.i64 = static_cast<int64_t>(op.factor); break;
  }
  const ncclResult_t r = ncclRedOpCreatePreMulSum(&out, &scalar, type, ncclScalarHostImmediate, comm);
  if (r != ncclSuccess) throw std::runtime_error("ncclRedOpCreatePreMulSum: " + describeNccl(r, comm));
  *created = true;
  return out;
}

WorkPtr NcclBackend::reduction(const OpContext& op, Op desc, const ReduceOp& reduceOp, DType dtype,
                               const std::function<ncclResult_t(ncclComm_t, cudaStream_t, ncclRedOp_t)>& calls) {
  return run(op, std::move(desc), [&](ncclComm_t comm, cudaStream_t stream) {
    bool created = false;
    ncclRedOp_t red = ncclSum;
    try {
      red = redOp(reduceOp, dtype, comm, &created);
    } catch (const std::exception&) {
      return ncclInvalidArgument;
    }
    const ncclResult_t r = calls(comm, stream, red);
    // NCCL allows destroying the op once the calls using it were made.
    if (created) ncclRedOpDestroy(red, comm);
    return r;
  });
}

void NcclBackend::abort(const std::string&) {
  aborted_.store(true, std::memory_order_release);
  std::vector<std::shared_ptr<Communicator>> comms;
  {
    MutexLock lock(&mutex_);
    for (auto& [device, state] : devices_) {
      comms.push_back(state.comm);
      if (state.intra) state.intra->abort();  // a kernel waiting on a peer returns
    }
  }
  // Outside the lock: an abort may take a moment, and the group's thread may be waiting
  // in deviceState() for the lock.
  for (auto& comm : comms) comm->abort();
}

void NcclBackend::shutdown() {
  closed_.store(true, std::memory_order_release);
  MutexLock once(&shutdownMutex_);
  if (!watchdog_) return;
  const auto deadline = Clock::now() + ctx_.timeout;
  // Works in flight end (or time out and abort their communicator) before teardown.
  const bool drained = watchdog_->drain(deadline);
  watchdog_.reset();
  std::map<int, DeviceState> devices;
  {
    MutexLock lock(&mutex_);
    devices.swap(devices_);
  }
  for (auto& [device, state] : devices) {
    DeviceGuard guard(device);
    state.comm->destroy(deadline);
    // After the communicator, whose abort (when it could not finish) ends NCCL's kernels.
    if (state.intra) state.intra->close(state.stream, drained && !aborted_.load());
    if (state.stream) cudaStreamDestroy(state.stream);
    if (state.barrierBuf) cudaFree(state.barrierBuf);
    if (state.nanFlag) cudaFree(state.nanFlag);
  }
}

}  // namespace commhost::nccl_backend
