// SPDX-License-Identifier: Apache-2.0
// torch.distributed backend "commhost": a c10d::ProcessGroup that issues every op on a
// commhost::ProcessGroup, a c10d::Work over the commhost Work, and a commhost::Store over
// the c10d::Store torch hands the backend (so the group rendezvous through torch's store).
//
// Tensors cross without copies: a contiguous at::Tensor becomes a commhost::Tensor view of
// the same memory that keeps the at::Tensor alive until the op is done. Complex tensors
// travel as their real view (twice the elements), as c10d's own backends do.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "commhost/process_group.h"
#include "commhost/store.h"
#include "commhost/work.h"

namespace commhost_torch {

// commhost::Store over a c10d::Store (torch's PrefixStore over its TCPStore, FileStore or
// HashStore). c10d's errors become commhost TimeoutError / StoreError naming the key.
class C10dStore final : public commhost::Store {
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

// The c10d Work of one commhost op. Its future completes (from the commhost backend's
// thread, through Future::whenDone) with the op's output tensors, or the op's error as a
// c10::Error with the commhost message.
// A non-contiguous tensor, as c10d's gloo takes it: the op runs on `copy` (contiguous), and
// when `tensor` is one the op writes, the copy goes back into it as the op completes.
struct Staged {
  at::Tensor tensor;  // the caller's
  at::Tensor copy;    // what commhost reads and writes
};

class TorchWork final : public c10d::Work {
 public:
  // `staged`: the outputs the op wrote into copies, copied back before the future completes.
  TorchWork(int rank, c10d::OpType type, commhost::WorkPtr work, std::vector<at::Tensor> outputs,
            std::vector<Staged> staged = {});
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
  commhost::WorkPtr work_;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

class TorchProcessGroup final : public c10d::ProcessGroup {
 public:
  explicit TorchProcessGroup(std::shared_ptr<commhost::ProcessGroup> group);
  ~TorchProcessGroup() override;

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

 private:
  // Runs `issue` (one commhost call) under issueMutex_ and turns its errors into c10::Error.
  template <class F> c10::intrusive_ptr<c10d::Work> run(c10d::OpType type, std::vector<at::Tensor> outputs, F&& issue);

  std::shared_ptr<commhost::ProcessGroup> group_;
  // commhost takes one group's calls from one thread at a time; torch may issue from the
  // caller's and the autograd engine's threads (DDP), so calls are serialised here.
  std::mutex issueMutex_;
};

// Builds the commhost group of one torch process group: loads the config at `configPath`
// (the embedded default when empty) with `overrides` ("key=value"), and creates the group
// over `store` as rank `rank` of `size`. Blocks on the rendezvous; call without the GIL.
c10::intrusive_ptr<TorchProcessGroup> createGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                  const std::string& configPath,
                                                  const std::vector<std::string>& overrides,
                                                  const std::string& subgroupSuffix);

}  // namespace commhost_torch
