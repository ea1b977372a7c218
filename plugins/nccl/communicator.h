// SPDX-License-Identifier: Apache-2.0
// One NCCL communicator: the group's ranks on one CUDA device each, created
// non-blocking (config.blocking = 0) and polled, so that creation and every call can be
// given up on: abort() ends any wait at once, from any thread.
//
// Threading: the group's thread creates it and issues ops (enqueue()); the backend's
// watchdog thread polls asyncError(); abort() comes from any thread. mutex_ guards the
// handle: NCCL calls on it never overlap, and none runs after abort() freed it.
#pragma once

#include <nccl.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "commhost/errors.h"
#include "commhost/mutex.h"
#include "commhost/store.h"
#include "options.h"
#include "unique_id.h"

namespace commhost::nccl_backend {

// Sets the current CUDA device for a scope and restores the caller's.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

class Communicator {
 public:
  struct Setup {
    int device = 0;
    // Which of the backend's communicators made through the store this is (0, 1, ...): the
    // store keys' name. Equal on every rank, which uses its own device (cuda:r on rank r
    // is common), because ranks create them in op order (c10d's ncclCommCounter_).
    int ordinal = 0;
    int rank = 0;
    int worldSize = 1;
    Store* store = nullptr;  // the backend's private store: unique id and who joined
    std::chrono::milliseconds timeout{0};
    const Options* options = nullptr;
    IdSource idSource;  // ncclIdSource() outside tests
    ErrorContext where;
  };
  // Exchanges the unique id, then ncclCommInitRankConfig and polls until NCCL reports
  // success, an error (BackendError) or the timeout passes (ncclCommAbort, then a
  // TimeoutError naming the ranks that never reached creation).
  static std::shared_ptr<Communicator> create(const Setup& setup);
  ~Communicator();  // aborts a communicator neither destroyed nor aborted

  int device() const { return device_; }
  int rank() const { return rank_; }  // in the communicator (NCCL's own for a split one)
  int size() const { return size_; }
  // Names this communicator alike on every rank of it, and apart from the backend's
  // others: the store key of its unique id, or the `id` split() was given.
  const std::string& id() const { return id_; }

  // ncclCommSplit of this communicator: a collective over every rank of it, each with its
  // color (NCCL_SPLIT_NOCOLOR: takes part, gets null) and key (orders the ranks of one
  // color). Non-blocking like create(): NCCL runs the split as a job of this
  // communicator, which reports ncclInProgress until the job ends (only then is the new
  // handle set), so this one is polled first, then the new one, both up to `deadline`.
  // The new communicator has `options`' config and the id `childId`. On failure, timeout or abort() this
  // communicator is aborted too (aborting it ends NCCL's job; its peers are stuck in the
  // same split or already gave up) and BackendError / TimeoutError / AbortedError says so.
  std::shared_ptr<Communicator> split(int color, int key, const Options& options, const std::string& childId,
                                      std::chrono::steady_clock::time_point deadline, const ErrorContext& where);

  // Runs `calls` (NCCL calls on the handle, between ncclGroupStart/End) and polls until
  // NCCL has taken them (ncclInProgress ends). Throws BackendError with NCCL's message,
  // AbortedError after abort(), TimeoutError when `deadline` passes first.
  void enqueue(const std::function<ncclResult_t(ncclComm_t)>& calls, std::chrono::steady_clock::time_point deadline,
               const ErrorContext& where);

  // ncclCommGetAsyncError: ncclSuccess, ncclInProgress or the error; with `message` the
  // describeNccl text. After abort(): ncclSuccess (nothing more to report). `ifFree`
  // (the watchdog): while another call holds the handle, ncclInProgress at once instead
  // of waiting, since a split holds it while it polls, up to the init timeout.
  ncclResult_t asyncError(std::string* message = nullptr, bool ifFree = false) EXCLUDES(mutex_);

  // ncclCommRevoke (where nccl.h and the loaded NCCL have it) then ncclCommAbort, once;
  // every later call is refused. Returns at once even when an op is stuck on the device.
  void abort() noexcept;
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }

  // ncclCommFinalize, polled until `deadline`, then ncclCommDestroy; abort() instead when
  // finalizing fails or times out.
  void destroy(std::chrono::steady_clock::time_point deadline) noexcept;

 private:
  Communicator(int device, ncclComm_t comm, int rank, int size, std::string id)
      : device_(device), id_(std::move(id)), rank_(rank), size_(size), comm_(comm) {}
  // abort() with mutex_ held: revoke, abort, forget the handle.
  void abortLocked() noexcept REQUIRES(mutex_);
  // Polls ncclCommGetAsyncError while it says ncclInProgress.
  ncclResult_t pollReady(std::chrono::steady_clock::time_point deadline, bool* timedOut) REQUIRES(mutex_);

  const int device_;
  const std::string id_;
  int rank_ = 0;  // set before the communicator is shared, never after
  int size_ = 1;
  std::atomic<bool> aborted_{false};  // set first by abort(), so pollers give up before it takes mutex_
  Mutex mutex_;
  ncclComm_t comm_ GUARDED_BY(mutex_);  // null once aborted or destroyed
};

}  // namespace commhost::nccl_backend
