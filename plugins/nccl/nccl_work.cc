// SPDX-License-Identifier: Apache-2.0
#include "nccl_work.h"

#include "commhost/sdk/option_schema.h"
#include "nccl_types.h"

namespace commhost::nccl_backend {

using Clock = std::chrono::steady_clock;

namespace {
// How often blocking waits and the watchdog look at pending events: NCCL ops take
// microseconds to seconds; 100 us keeps the CPU cost low and the latency small.
constexpr auto kPoll = std::chrono::microseconds(100);
}  // namespace

NcclWork::NcclWork(const OpContext& ctx, std::shared_ptr<Communicator> comm, cudaEvent_t start, cudaEvent_t timedStart,
                   cudaEvent_t end, bool blockingWait, std::vector<Tensor> keep, std::vector<Tensor> outputs)
    : AsyncWork(ctx),
      comm_(std::move(comm)),
      start_(start),
      timedStart_(timedStart),
      end_(end),
      blockingWait_(blockingWait),
      deadline_(Clock::now() + ctx.timeout),
      keep_(std::move(keep)),
      outputs_(std::move(outputs)) {}

NcclWork::~NcclWork() {
  if (start_) cudaEventDestroy(start_);
  if (timedStart_) cudaEventDestroy(timedStart_);
  if (end_) cudaEventDestroy(end_);
}

std::optional<double> NcclWork::deviceMs() {
  if (!timedStart_ || exception()) return std::nullopt;
  DeviceGuard guard(comm_->device());
  float ms = 0;
  // cudaErrorNotReady until both events fired: not known yet, not an error of the op.
  if (cudaEventElapsedTime(&ms, timedStart_, end_) != cudaSuccess) {
    (void)cudaGetLastError();
    return std::nullopt;
  }
  return ms;
}

void NcclWork::failWith(ErrorCode code, const std::string& what, const std::string& hint, bool abortComm) {
  try {
    raise(code, ErrorContext::of(ctx_), what, hint);
  } catch (...) {
    fail(std::current_exception());
  }
  if (abortComm) abortAll();
}

void NcclWork::setHooks(WorkHooks hooks) {
  MutexLock lock(&mutex_);
  hooks_ = std::move(hooks);
}

void NcclWork::abortAll() {
  std::function<void()> hook;
  {
    MutexLock lock(&mutex_);
    hook = hooks_.abort;
  }
  if (hook) hook();
  comm_->abort();
}

int NcclWork::queryEnd() {
  const cudaError_t e = cudaEventQuery(end_);
  if (e == cudaSuccess) return 1;
  if (e == cudaErrorNotReady) return 0;
  (void)cudaGetLastError();
  failWith(ErrorCode::Backend, std::string("the op's CUDA stream failed: ") + cudaGetErrorString(e),
           "a kernel before or in this op faulted: check the device (nvidia-smi, compute-sanitizer)", true);
  return -1;
}

void NcclWork::finishEnded() {
  std::vector<Tensor> outputs;
  std::function<void()> verify;
  {
    MutexLock lock(&mutex_);
    // One thread finishes (the watchdog, a blocking wait() or isCompleted()); the others
    // see the future complete once it has the verdict.
    if (ending_) return;
    ending_ = true;
    outputs = std::move(outputs_);
    keep_.clear();
    verify = hooks_.verify;
  }
  try {
    if (verify) verify();
  } catch (...) {
    fail(std::current_exception());
    return;
  }
  finish(std::move(outputs));
}

bool NcclWork::poll() {
  if (future()->isCompleted()) return true;
  const int state = queryEnd();
  if (state < 0) return true;
  if (state > 0) {
    finishEnded();
    return future()->isCompleted();
  }
  std::string message;
  const ncclResult_t r = comm_->asyncError(&message, true);
  if (r != ncclSuccess && r != ncclInProgress) {
    failWith(ErrorCode::Backend, message, hintFor(r) + "; the communicator was aborted: create a new group", true);
    return true;
  }
  if (comm_->aborted()) {
    failWith(ErrorCode::Aborted, "the NCCL communicator was aborted", "create a new group to continue", false);
    return true;
  }
  if (Clock::now() >= deadline_) {
    failWith(ErrorCode::Timeout,
             "not completed within " + formatDuration(ctx_.timeout) + " on the device; the communicator was aborted",
             "a peer may be missing this collective or be slow: check every rank issues the same ops in the same "
             "order, or raise the timeout",
             true);
    return true;
  }
  return false;
}

// Completed only with its verdict: an intra-node kernel's failure (hooks_.verify) is
// known only after its end event fired, and the supervisor records a work that says
// "completed" with no exception as a success.
bool NcclWork::isCompleted() {
  if (future()->isCompleted()) return true;
  if (queryEnd() > 0) finishEnded();
  return future()->isCompleted();
}

bool NcclWork::wait(std::chrono::milliseconds timeout) {
  if (!blockingWait_) {
    // Stream semantics: the caller's stream runs what it queues next after the op;
    // the CPU goes on at once. An error already known is reported now.
    if (auto error = exception()) std::rethrow_exception(error);
    DeviceGuard guard(comm_->device());
    const cudaError_t e = cudaStreamWaitEvent(static_cast<cudaStream_t>(ctx_.stream), end_, 0);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      raise(ErrorCode::Backend, ErrorContext::of(ctx_),
            std::string("cudaStreamWaitEvent on the caller's stream failed: ") + cudaGetErrorString(e),
            "check the current stream (commhost::setCurrentStream) belongs to the tensor's device");
    }
    return true;
  }
  const auto limit = timeout.count() > 0 ? timeout : ctx_.timeout;
  const auto deadline = Clock::now() + limit;
  while (!poll()) {
    if (Clock::now() >= deadline) {
      failWith(ErrorCode::Timeout,
               "not completed within " + formatDuration(limit) + " (blocking_wait); the communicator was aborted",
               "a peer may be missing this collective or be slow: check every rank issues the same ops in the "
               "same order, or raise the timeout",
               true);
      break;
    }
    std::this_thread::sleep_for(kPoll);
  }
  if (auto error = exception()) std::rethrow_exception(error);
  return true;
}

void NcclWork::abort(const std::string& reason) {
  AsyncWork::abort(reason);
  abortAll();
}

Watchdog::Watchdog() : thread_([this] { run(); }) {}

Watchdog::~Watchdog() {
  stop();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::add(std::shared_ptr<NcclWork> work) {
  MutexLock lock(&mutex_);
  works_.push_back(std::move(work));
  cv_.signalAll();
}

bool Watchdog::drain(Clock::time_point deadline) {
  MutexLock lock(&mutex_);
  while (!works_.empty())
    if (!cv_.waitUntil(&mutex_, deadline) && Clock::now() >= deadline) return works_.empty();
  return true;
}

void Watchdog::stop() {
  MutexLock lock(&mutex_);
  stop_ = true;
  cv_.signalAll();
}

void Watchdog::run() {
  MutexLock lock(&mutex_);
  while (!stop_) {
    if (works_.empty()) {
      cv_.wait(&mutex_);
      continue;
    }
    // Polled without the lock: poll() may abort a communicator, which can take a while.
    std::deque<std::shared_ptr<NcclWork>> pending;
    pending.swap(works_);
    mutex_.unlock();
    std::deque<std::shared_ptr<NcclWork>> left;
    for (auto& w : pending)
      if (!w->poll()) left.push_back(std::move(w));
    pending.clear();  // finished works (and their tensors) go here, outside the lock
    mutex_.lock();
    for (auto& w : works_) left.push_back(std::move(w));
    works_.swap(left);
    if (works_.empty()) cv_.signalAll();  // drain()
    else cv_.waitFor(&mutex_, kPoll);
  }
}

}  // namespace commhost::nccl_backend
