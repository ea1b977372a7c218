// SPDX-License-Identifier: Apache-2.0
#include "communicator.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "nccl_types.h"

#if defined(NCCL_REVOKE_DEFAULT)  // nccl.h declares ncclCommRevoke (2.28.x; not every 2.28)
// Weak: built against nccl.h 2.28.9, the plugin runs on whatever libnccl.so.2 the machine
// has, and some lack ncclCommRevoke. A strong reference made the whole plugin fail to load
// ("undefined symbol: ncclCommRevoke", seen with a CUDA image's system NCCL 2.28.3) for one
// optional call; weak, it is null there and abort goes without it.
// tests/tools/nccl_symbols_test.sh keeps every newer symbol weak.
#pragma weak ncclCommRevoke
#endif

namespace commhost::nccl_backend {

using Clock = std::chrono::steady_clock;

namespace {

// How a pending NCCL call (the communicators are non-blocking) is polled. An enqueue usually
// resolves in microseconds, so the poller first spins (yielding) for kPollSpin; then it
// sleeps, doubling the nap up to kPollMaxNap, so a long init or split does not burn a core.
// Measured on an H200 at world 1 (commhost bench --device cuda --op alltoall): grouped
// send/recv return ncclInProgress from ncclGroupEnd, and a fixed 50 us sleep between polls
// made every alltoall take 137 us at any size, against 38 us through torch.distributed.
constexpr auto kPollSpin = std::chrono::microseconds(200);
constexpr auto kPollFirstNap = std::chrono::microseconds(20);
constexpr auto kPollMaxNap = std::chrono::microseconds(1000);

std::string joinKey(int ordinal, int rank) {
  return "nccl_join/" + std::to_string(ordinal) + "/" + std::to_string(rank);
}

// The ranks whose join key is missing: they never started creating this communicator.
std::string missingRanks(Store& store, int ordinal, int worldSize) {
  std::string out;
  for (int r = 0; r < worldSize; ++r)
    if (!store.check({joinKey(ordinal, r)})) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

}  // namespace

DeviceGuard::DeviceGuard(int device) {
  if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
  if (previous_ != device) cudaSetDevice(device);
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0) cudaSetDevice(previous_);
}

std::shared_ptr<Communicator> Communicator::create(const Setup& s) {
  DeviceGuard guard(s.device);
  const auto deadline = Clock::now() + s.timeout;
  ErrorContext where = s.where;
  // Published before the id wait, so a timeout anywhere below can name who never came.
  s.store->set(joinKey(s.ordinal, s.rank), toBytes("1"));
  const std::string idKey = uniqueIdKey(s.ordinal);
  ncclUniqueId id = exchangeUniqueId(*s.store, s.rank, idKey, s.timeout, s.idSource, where);
  ncclConfig_t config = configFor(*s.options);
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&comm, s.worldSize, id, s.rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    const std::string what = describeNccl(r, comm);
    if (comm) ncclCommAbort(comm);
    raise(ErrorCode::Backend, where,
          "creating the NCCL communicator of cuda:" + std::to_string(s.device) + " failed: " + what,
          initHintFor(r, what));
  }
  auto self = std::shared_ptr<Communicator>(new Communicator(s.device, comm, s.rank, s.worldSize, idKey));
  MutexLock lock(&self->mutex_);
  bool timedOut = false;
  r = self->pollReady(deadline, &timedOut);
  if (timedOut) {
    ncclCommAbort(self->comm_);
    self->comm_ = nullptr;
    self->aborted_ = true;
    const std::string missing = missingRanks(*s.store, s.ordinal, s.worldSize);
    raise(ErrorCode::Timeout, where,
          "creating the NCCL communicator of cuda:" + std::to_string(s.device) + " did not finish within " +
              std::to_string(s.timeout.count()) + " ms" +
              (missing.empty() ? " (every rank started it)" : "; ranks that never started it: " + missing),
          missing.empty() ? "every rank reached ncclCommInitRankConfig: check the network between hosts "
                            "(NCCL_DEBUG=INFO, net_name) or raise init_timeout"
                          : "those ranks never issued an op on this device (or died first): check they are alive "
                            "and issue the same ops, or raise init_timeout");
  }
  if (r != ncclSuccess) {
    const std::string what = describeNccl(r, self->comm_);
    ncclCommAbort(self->comm_);
    self->comm_ = nullptr;
    self->aborted_ = true;
    raise(ErrorCode::Backend, where,
          "creating the NCCL communicator of cuda:" + std::to_string(s.device) + " failed: " + what,
          initHintFor(r, what));
  }
  return self;
}

Communicator::~Communicator() { abort(); }

std::shared_ptr<Communicator> Communicator::split(int color, int key, const Options& options,
                                                  const std::string& childId, Clock::time_point deadline,
                                                  const ErrorContext& where) {
  const std::string what = "ncclCommSplit of the NCCL communicator of cuda:" + std::to_string(device_) + " (color " +
                           (color == NCCL_SPLIT_NOCOLOR ? std::string("none") : std::to_string(color)) + ", key " +
                           std::to_string(key) + ")";
  MutexLock lock(&mutex_);
  if (!comm_ || aborted())
    raise(ErrorCode::Aborted, where, what + " was not started: the parent's communicator was aborted",
          "the other ranks of the parent group fail in the same split: create the parent group again");
  DeviceGuard guard(device_);
  ncclConfig_t config = configFor(options);
  ncclComm_t child = nullptr;
  ncclResult_t r = ncclCommSplit(comm_, color, key, &child, &config);
  bool timedOut = false;
  if (r == ncclSuccess || r == ncclInProgress) r = pollReady(deadline, &timedOut);
  if (timedOut || aborted() || r != ncclSuccess) {
    ErrorCode code = ErrorCode::Backend;
    std::string why = " failed: " + describeNccl(r, comm_);
    std::string next = hintFor(r) + "; then create the groups again";
    if (timedOut) {
      code = ErrorCode::Timeout;
      why = " did not finish before the init timeout";
      next =
          "a rank of the parent group did not reach the split (it died, or issues other ops first): check every "
          "rank is alive, or raise init_timeout; then create the groups again";
    } else if (aborted()) {
      code = ErrorCode::Aborted;
      why = " was ended by abort()";
      next = "create the groups again to continue";
    }
    // Aborting the parent ends NCCL's split job and joins its thread, so `child` (which
    // the job writes) is settled below.
    abortLocked();
    if (child) (void)ncclCommAbort(child);
    raise(code, where, what + why + "; the parent's communicator was aborted with it", next);
  }
  if (color == NCCL_SPLIT_NOCOLOR) {
    if (child) (void)ncclCommAbort(child);  // NCCL gives none; never keep one we did not ask for
    return nullptr;
  }
  if (!child)
    raise(ErrorCode::Backend, where, what + " succeeded but gave no communicator",
          "run with NCCL_DEBUG=INFO and report it with the NCCL version");
  auto self = std::shared_ptr<Communicator>(new Communicator(device_, child, -1, 0, childId));
  MutexLock childLock(&self->mutex_);
  r = self->pollReady(deadline, &timedOut);
  int rank = -1, size = 0;
  if (!timedOut && r == ncclSuccess) r = ncclCommUserRank(child, &rank);
  if (!timedOut && r == ncclSuccess) r = ncclCommCount(child, &size);
  if (timedOut || r != ncclSuccess) {
    const std::string why = timedOut ? " made a communicator that was not ready before the init timeout"
                                     : " made a communicator that failed: " + describeNccl(r, child);
    self->abortLocked();
    raise(timedOut ? ErrorCode::Timeout : ErrorCode::Backend, where, what + why,
          timedOut ? "raise init_timeout, or check the network between the subgroup's hosts"
                   : hintFor(r) + "; then create the subgroup again");
  }
  self->rank_ = rank;
  self->size_ = size;
  return self;
}

ncclResult_t Communicator::pollReady(Clock::time_point deadline, bool* timedOut) {
  *timedOut = false;
  const auto spinUntil = Clock::now() + kPollSpin;
  auto nap = kPollFirstNap;
  for (;;) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
    if (r != ncclSuccess) return r;
    if (state != ncclInProgress) return state;
    if (aborted_.load(std::memory_order_acquire)) return ncclSuccess;  // the caller checks aborted()
    if (Clock::now() >= deadline) {
      *timedOut = true;
      return ncclInProgress;
    }
    if (Clock::now() < spinUntil) {
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, kPollMaxNap);
  }
}

void Communicator::enqueue(const std::function<ncclResult_t(ncclComm_t)>& calls, Clock::time_point deadline,
                           const ErrorContext& where) {
  MutexLock lock(&mutex_);
  if (!comm_ || aborted())
    raise(ErrorCode::Aborted, where, "the NCCL communicator of cuda:" + std::to_string(device_) + " was aborted",
          "create a new group to continue");
  ncclResult_t r = ncclGroupStart();
  const ncclResult_t inner = r == ncclSuccess ? calls(comm_) : r;
  r = ncclGroupEnd();
  if (inner != ncclSuccess && inner != ncclInProgress) r = inner;
  bool timedOut = false;
  if (r == ncclInProgress || r == ncclSuccess) r = pollReady(deadline, &timedOut);
  if (aborted())
    raise(ErrorCode::Aborted, where, "the NCCL communicator was aborted while the op was being queued",
          "create a new group to continue");
  if (timedOut)
    raise(ErrorCode::Timeout, where, "NCCL did not accept the op before its timeout",
          "a peer may be missing or stuck: check every rank issues the same ops");
  if (r != ncclSuccess)
    raise(ErrorCode::Backend, where, describeNccl(r, comm_),
          hintFor(r) + "; the communicator is unusable now: abort the group and create a new one");
}

ncclResult_t Communicator::asyncError(std::string* message, bool ifFree) {
  if (ifFree) {
    if (!mutex_.tryLock()) return ncclInProgress;
  } else {
    mutex_.lock();
  }
  ncclResult_t result = ncclSuccess;
  if (comm_) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
    result = r != ncclSuccess ? r : state;
    if (message && result != ncclSuccess && result != ncclInProgress) *message = describeNccl(result, comm_);
  }
  mutex_.unlock();
  return result;
}

void Communicator::abort() noexcept {
  aborted_.store(true, std::memory_order_release);
  MutexLock lock(&mutex_);
  abortLocked();
}

void Communicator::abortLocked() noexcept {
  aborted_.store(true, std::memory_order_release);
  if (!comm_) return;
  DeviceGuard guard(device_);
#if defined(NCCL_REVOKE_DEFAULT)
  // Stops in-flight kernels first, so the abort below never waits on a stuck one.
  if (&ncclCommRevoke != nullptr) (void)ncclCommRevoke(comm_, NCCL_REVOKE_DEFAULT);
#endif
  (void)ncclCommAbort(comm_);
  comm_ = nullptr;
}

void Communicator::destroy(Clock::time_point deadline) noexcept {
  {
    MutexLock lock(&mutex_);
    if (!comm_) return;
    DeviceGuard guard(device_);
    ncclResult_t r = ncclCommFinalize(comm_);
    bool timedOut = false;
    if (r == ncclSuccess || r == ncclInProgress) r = pollReady(deadline, &timedOut);
    if (r == ncclSuccess && !timedOut && !aborted()) {
      (void)ncclCommDestroy(comm_);
      comm_ = nullptr;
      return;
    }
  }
  abort();
}

}  // namespace commhost::nccl_backend
