// SPDX-License-Identifier: Apache-2.0
// The nccl backend: every collective on CUDA tensors over NCCL (the role of c10d's
// ProcessGroupNCCL). One communicator and one NCCL stream per device, created on the
// first op on that device (or in the factory with eager_init); the unique id travels
// through the backend's private store.
//
// Subgroups (split.h says when and why): prepareSplit() runs on every rank of the parent
// in newGroup/split. When every rank has a live communicator on its current device (the
// same one), all call ncclCommSplit on it there (ranks in no subgroup with
// NCCL_SPLIT_NOCOLOR), and the subgroup's backend starts with the new communicator on
// that device (SplitComm through BackendContext::splitFrom); otherwise it creates a fresh
// one through its own store, as any group does. Either way its communicators of other
// devices are created fresh on first use.
//
// Threading: ops come from the group's thread, which alone creates devices' state
// (devices_ is guarded for abort() and shutdown(), which may come from any thread).
// Works are finished by the watchdog thread (nccl_work.h). Tensors stay alive in their
// work until the op ends on the device.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <functional>
#include <map>

#include "commhost/sdk/plugin.h"
#include "commhost/sdk/typed_options.h"
#include "communicator.h"
#include "intra_comm.h"
#include "nccl_types.h"
#include "nccl_work.h"
#include "options.h"

namespace commhost::nccl_backend {

std::unique_ptr<Backend> create(const Options& options, const BackendContext& ctx);

// What the parent's prepareSplit() hands the subgroup's backend on this rank
// (BackendContext::splitFrom): the communicator ncclCommSplit made on `device`, in which
// this rank is `rank`. Dropped unused, it aborts the communicator.
struct SplitComm {
  int device = 0;
  int rank = 0;
  std::shared_ptr<Communicator> comm;
};

class NcclBackend final : public Backend {
 public:
  NcclBackend(const Options& options, const BackendContext& ctx, IdSource idSource = {});
  ~NcclBackend() override;
  const Capabilities& capabilities() const override { return nccl_backend::capabilities(); }

  WorkPtr allreduce(const OpContext& op, Tensor& tensor, const AllreduceOptions& opts) override;
  WorkPtr allreduceCoalesced(const OpContext& op, std::vector<Tensor>& tensors,
                             const AllreduceCoalescedOptions& opts) override;
  WorkPtr broadcast(const OpContext& op, Tensor& tensor, const BroadcastOptions& opts) override;
  WorkPtr reduce(const OpContext& op, Tensor& tensor, const ReduceOptions& opts) override;
  WorkPtr allgather(const OpContext& op, std::vector<Tensor>& outputs, const Tensor& input,
                    const AllgatherOptions& opts) override;
  WorkPtr allgatherIntoTensor(const OpContext& op, Tensor& output, const Tensor& input,
                              const AllgatherOptions& opts) override;
  WorkPtr allgatherCoalesced(const OpContext& op, std::vector<std::vector<Tensor>>& outputs,
                             const std::vector<Tensor>& inputs, const AllgatherOptions& opts) override;
  WorkPtr gather(const OpContext& op, std::vector<Tensor>& outputs, const Tensor& input,
                 const GatherOptions& opts) override;
  WorkPtr scatter(const OpContext& op, Tensor& output, const std::vector<Tensor>& inputs,
                  const ScatterOptions& opts) override;
  WorkPtr reduceScatter(const OpContext& op, Tensor& output, const std::vector<Tensor>& inputs,
                        const ReduceScatterOptions& opts) override;
  WorkPtr reduceScatterTensor(const OpContext& op, Tensor& output, const Tensor& input,
                              const ReduceScatterOptions& opts) override;
  WorkPtr alltoall(const OpContext& op, std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                   const AlltoallOptions& opts) override;
  WorkPtr alltoallSingle(const OpContext& op, Tensor& output, const Tensor& input,
                         const AlltoallSingleOptions& opts) override;
  WorkPtr barrier(const OpContext& op, const BarrierOptions& opts) override;
  WorkPtr send(const OpContext& op, const Tensor& tensor, int dst, const SendOptions& opts) override;
  WorkPtr recv(const OpContext& op, Tensor& tensor, int src, const RecvOptions& opts) override;

  void abort(const std::string& reason) override;
  void shutdown() override;
  // Votes, then splits the current device's communicator when every rank agrees (split.h).
  std::shared_ptr<void> prepareSplit(const SplitRequest& request) override;

 private:
  struct DeviceState {
    std::shared_ptr<Communicator> comm;
    cudaStream_t stream = nullptr;
    int* nanFlag = nullptr;       // device int the NaN check sets (nan_check only)
    float* barrierBuf = nullptr;  // the one element barrier reduces
    // Set when intra_node is on and every rank could take part (intra_comm.h).
    std::shared_ptr<IntraComm> intra;
  };
  // The NCCL calls of one op, on its communicator and the device's NCCL stream.
  using Calls = std::function<ncclResult_t(ncclComm_t, cudaStream_t)>;
  struct Op {
    int device = 0;
    std::vector<Tensor> keep;       // every tensor of the op, kept alive until it ends
    std::vector<Tensor> outputs;    // what the future completes with
    std::vector<Tensor> nanInputs;  // checked when nan_check is on
    bool blocking = false;          // wait() blocks the CPU whatever blocking_wait says
    WorkHooks hooks;                // for ops that are not only NCCL calls
  };

  // The device's state, creating the communicator and stream on first use.
  DeviceState& deviceState(const OpContext& op, int device);
  // Adds `device`'s state around `comm` (its stream and buffers); refused after abort().
  DeviceState& addDevice(const ErrorContext& where, int device, std::shared_ptr<Communicator> comm);
  // The communicator of `device` when it exists and is usable (not aborted, no async error).
  std::shared_ptr<Communicator> liveComm(int device);
  // Orders the NCCL stream after the caller's, runs the NaN check, queues `calls`,
  // records the end event and hands the work to the watchdog.
  WorkPtr run(const OpContext& op, Op desc, const Calls& calls);
  void checkNan(const OpContext& op, DeviceState& state, const std::vector<Tensor>& inputs);
  // A reduce op for NCCL: built in, or a PreMulSum created on `comm` (destroy it after
  // the calls with ncclRedOpDestroy when *created).
  ncclRedOp_t redOp(const ReduceOp& op, DType dtype, ncclComm_t comm, bool* created);
  WorkPtr reduction(const OpContext& op, Op desc, const ReduceOp& reduceOp, DType dtype,
                    const std::function<ncclResult_t(ncclComm_t, cudaStream_t, ncclRedOp_t)>& calls);
  // The intra-node kernels' allreduce (intra_ops.cc), or null when NCCL should run it.
  WorkPtr intraAllreduce(const OpContext& op, Tensor& tensor, const AllreduceOptions& opts);
  // cudaGetDevice, for ops without a tensor (barrier) before any communicator exists.
  int currentDevice(const OpContext& op) const;

  BackendContext ctx_;
  Options options_;
  IdSource idSource_;
  std::atomic<bool> aborted_{false};
  std::atomic<bool> closed_{false};  // shutdown() began: later ops are refused
  Mutex shutdownMutex_;              // one shutdown() at a time; the second finds nothing left
  Mutex mutex_;
  std::map<int, DeviceState> devices_ GUARDED_BY(mutex_);
  int created_ = 0;  // group thread: communicators made through the store so far (Setup::ordinal)
  std::unique_ptr<Watchdog> watchdog_ GUARDED_BY(shutdownMutex_);  // set by the constructor
};

}  // namespace commhost::nccl_backend
