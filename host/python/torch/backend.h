// SPDX-License-Identifier: Apache-2.0
// torch.distributed backend "commhost": a c10d::Backend (torch 2.x; a c10d::ProcessGroup on
// torch 1.13, see torch_compat.h) that issues every op on a commhost::ProcessGroup, a
// c10d::Work over the commhost Works, and a commhost::Store over the c10d::Store torch
// hands the backend (so the group rendezvous through torch's store).
//
// Tensors cross without copies: a contiguous at::Tensor becomes a commhost::Tensor view of
// the same memory that keeps the at::Tensor alive until the op is done. Complex tensors
// travel as their real view (twice the elements), as c10d's own backends do.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "commhost/mutex.h"
#include "commhost/process_group.h"
#include "commhost/store.h"
#include "commhost/work.h"
#include "torch_compat.h"

namespace commhost_torch {

// commhost::Store over a c10d::Store (torch's PrefixStore over its TCPStore, FileStore or
// HashStore). c10d's errors become commhost TimeoutError / StoreError naming the key.
class C10dStore final : public commhost::StoreBase {
 public:
  explicit C10dStore(c10::intrusive_ptr<c10d::Store> store);
  using commhost::Store::wait;
  void set(const std::string& key, const commhost::Bytes& value) override;
  commhost::Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  commhost::Bytes compareSet(const std::string& key, const commhost::Bytes& expected,
                             const commhost::Bytes& desired) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool deleteKey(const std::string& key) override;
  int64_t numKeys() override;
  // c10d::Store (torch 1.13) has no append: a compareSet loop does it atomically.
  void append(const std::string& key, const commhost::Bytes& value) override;

 private:
  c10::intrusive_ptr<c10d::Store> store_;
};

// A non-contiguous tensor, as c10d's gloo takes it: the op runs on `copy` (contiguous), and
// when `tensor` is one the op writes, the copy goes back into it as the op completes.
struct Staged {
  at::Tensor tensor;  // the caller's
  at::Tensor copy;    // what commhost reads and writes
};

// What one torch call issued: its commhost works (one per op; several for a coalesced
// call), the tensors its future yields and the staged copies to write back.
struct Issued {
  std::vector<commhost::WorkPtr> works;
  std::vector<at::Tensor> outputs;
  std::vector<Staged> staged;
  void append(const Issued& other);
};

// The c10d Work of one torch call. Its future completes (from the commhost backend thread
// that finishes the last op, through Future::whenDone) with the call's output tensors, or
// the first failed op's error as a c10::Error with the commhost message.
class TorchWork final : public c10d::Work {
 public:
  TorchWork(int rank, c10d::OpType type, Issued issued);
  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  int sourceRank() const override;
  std::vector<at::Tensor> result() override;
  void synchronize() override {}
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void abort() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

 private:
  std::vector<commhost::WorkPtr> works_;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

class TorchBackend final : public compat::BackendBase {
 public:
  explicit TorchBackend(std::shared_ptr<commhost::ProcessGroup> group);
  ~TorchBackend() override;

  const std::string getBackendName() const override { return "commhost"; }
  const std::shared_ptr<commhost::ProcessGroup>& group() const { return group_; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputLists,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplitSizes,
                                               std::vector<int64_t>& inputSplitSizes,
                                               const c10d::AllToAllOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts = {}) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks = false) override;
  void setSequenceNumberForGroup() override {}  // commhost numbers every op itself
  uint64_t getSequenceNumberForGroup() override { return group_->seq(); }
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts = {}) override;

#if TORCH_VERSION_MAJOR >= 2
  // torch 2.x's Backend surface beyond 1.13's ProcessGroup (the end of process_group.cc).
  // Coalescing: the ops issued between start and end run as issued (in the same order on
  // every rank, which is what coalescing guarantees), and endCoalescing's Work covers them.
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts = {}) override;
  // commhost times every op already (its flight recorder); nothing to switch on.
  void enableCollectivesTiming() override {}
  // Waits for every op this backend issued that has not completed.
  void waitForPendingWorks() override;
  // Calls `hook` once per completed op, on commhost's hook thread (never a backend thread).
  void registerOnCompletionHook(std::function<void(std::shared_ptr<c10d::WorkInfo>)>&& hook) override;
#endif

 private:
  // Runs `issue` (the commhost ops of one torch call, returning an Issued) under
  // issueMutex_, turns its errors into c10::Error and returns the call's Work.
  template <class F> c10::intrusive_ptr<c10d::Work> run(c10d::OpType type, std::vector<at::Tensor> outputs, F&& issue);
  // Notes one call's works for waitForPendingWorks and an open coalescing block; called
  // with issueMutex_ held.
  void track(const Issued& issued) REQUIRES(issueMutex_);

  std::shared_ptr<commhost::ProcessGroup> group_;
  // commhost takes one group's calls from one thread at a time; torch may issue from the
  // caller's and the autograd engine's threads (DDP), so calls are serialised here.
  commhost::Mutex issueMutex_;
  // What was issued since startCoalescing; `coalescing_` false outside a coalescing block.
  bool coalescing_ GUARDED_BY(issueMutex_) = false;
  Issued coalesced_ GUARDED_BY(issueMutex_);
  // Recent works, for waitForPendingWorks (completed ones pruned).
  std::vector<std::weak_ptr<commhost::Work>> pending_ GUARDED_BY(issueMutex_);
  int completionHook_ = -1;  // commhost hook id, -1: none
};

// Builds the commhost group of one torch process group: loads the config at `configPath`
// (the embedded default when empty) with `overrides` ("key=value"), and creates the group
// over `store` as rank `rank` of `size`. Blocks on the rendezvous; call without the GIL.
c10::intrusive_ptr<TorchBackend> createGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                             const std::string& configPath, const std::vector<std::string>& overrides,
                                             const std::string& subgroupSuffix);

}  // namespace commhost_torch
