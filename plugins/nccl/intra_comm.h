// SPDX-License-Identifier: Apache-2.0
// The nccl backend's intra-node allreduce (option intra_node): for one communicator, this
// rank's region mapped by every peer (CUDA IPC across processes, the pointer itself with
// peer access within one), the kernel config and step counter every rank agrees on, and
// the host-mapped words the kernels report through (intra_allreduce.h).
//
// Setup is all-or-nothing. Every rank publishes where it runs (host, device, SMs, its
// NVLinks read through NVML); from those, every rank computes the same topology and
// config. Then each checks it can map every peer's device, allocates, and the ranks agree
// through the store (agree() in intra_setup.h) twice: on the handles, then on having
// opened them. Where any rank cannot, create() returns null on every rank, logs the
// reason once, and allreduce stays on NCCL. Only fully connected NVLink meshes take part:
// a hybrid cube mesh (DGX-1) falls back to NCCL, as does an unknown topology.
//
// Threading: create(), select(), checkUsable() and launch() run on the group's thread
// (launch() inside the op's enqueue); verify() on the watchdog thread or a blocking
// waiter; abort() on any thread; close() from shutdown(). mutex_ keeps abort() and
// verify() off the memory close() frees.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "commhost/kernels/intra_allreduce.h"
#include "commhost/mutex.h"
#include "commhost/sdk/plugin.h"

namespace commhost::nccl_backend {

class IntraComm {
 public:
  struct Setup {
    const BackendContext* ctx = nullptr;  // store, rank, world, timeout, logger (copied)
    int device = 0;                       // this rank's CUDA device
    std::string key;                      // store key prefix of this setup, equal on every rank
    kernels::IntraLimits limits;
  };
  // The communicator's intra state, or null when some rank cannot take part (the reason
  // in *why and logged at info). Throws what the store exchange throws (a rank missing).
  static std::shared_ptr<IntraComm> create(const Setup& setup, std::string* why = nullptr);
  ~IntraComm();  // close(nullptr, false) unless closed
  IntraComm(const IntraComm&) = delete;
  IntraComm& operator=(const IntraComm&) = delete;

  kernels::NvlTopology topology() const { return topology_; }
  const kernels::IntraConfig& config() const { return config_; }
  // One-shot, two-shot, or None (NCCL) for this allreduce (selectAllreduce with this
  // communicator's limits); the same on every rank for the same arguments.
  kernels::IntraAlgo select(size_t bytes, DType dtype, ReduceOp::Kind kind) const;

  // Throws BackendError when an earlier launch failed: the ranks' steps no longer agree,
  // so the intra path of this communicator is unusable.
  void checkUsable(const OpContext& op);
  // Queues the kernel on `stream` with the next step base (returned in *base). Returns the
  // cudaError_t of the launch as an int; a failed launch makes the intra path unusable.
  int launch(void* data, size_t count, DType dtype, const ReduceOp& op, kernels::IntraAlgo algo,
             std::chrono::milliseconds timeout, cudaStream_t stream, uint64_t* base);
  // Once the launch with step base `base` ended on the device: throws its failure
  // (TimeoutError, AbortedError, InvalidArgument for ranks that disagree, BackendError for
  // a launch skipped after an earlier failure), naming op's group, rank, op and seq.
  void verify(const OpContext& op, uint64_t base);
  // Sets the abort word: a kernel waiting on a peer returns within microseconds.
  void abort();
  // Frees everything once this rank's kernels on `stream` ended (the abort word ends any
  // still waiting). clean (no abort, no failure): first waits, the group's timeout at
  // most, until no peer's kernel can still read this rank's region.
  void close(cudaStream_t stream, bool clean);

 private:
  struct HostWords {  // cudaHostAlloc'd, mapped: what the kernels and the host share
    kernels::IntraError error;
    uint32_t abort = 0;
  };
  IntraComm(const Setup& setup, kernels::NvlTopology topology, const kernels::IntraConfig& config);
  std::string allocate();  // "" or why not
  std::string exportText() const;
  std::string openPeers(const std::vector<std::string>& process, const std::vector<std::string>& busIds,
                        const std::vector<std::string>& payloads);
  bool awaitPeersDone(cudaStream_t stream);
  void release() REQUIRES(mutex_);

  const BackendContext ctx_;
  const int device_;
  const std::string key_;
  const kernels::IntraLimits limits_;
  const kernels::NvlTopology topology_;
  const kernels::IntraConfig config_;
  const kernels::IntraLayout layout_;
  kernels::IntraSteps steps_;                       // the group's thread only
  std::atomic<uint64_t> issued_{0};                 // steps_.next(), for close() on another thread
  std::string launchFailure_;                       // the group's thread only: why a launch failed, "" if none
  uint8_t* regions_[kernels::kIntraMaxRanks] = {};  // set up by create(), then read-only
  bool opened_[kernels::kIntraMaxRanks] = {};       // peers mapped by cudaIpcOpenMemHandle
  HostWords* devWords_ = nullptr;                   // words_ as the device sees it
  Mutex mutex_;
  bool closed_ GUARDED_BY(mutex_) = false;
  HostWords* words_ GUARDED_BY(mutex_) = nullptr;
};

}  // namespace commhost::nccl_backend
