// SPDX-License-Identifier: Apache-2.0
// TorchProcessGroup and TorchWork: every c10d op issued on a commhost::ProcessGroup.
#include "backend.h"

#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>

#include <utility>

#include "commhost/errors.h"

namespace commhost_torch {
namespace {

// A commhost (or any std) error as the c10::Error torch surfaces, with the same text.
std::exception_ptr asC10(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const c10::Error&) {
    return error;
  } catch (const std::exception& e) {
    return std::make_exception_ptr(c10::Error(e.what(), ""));
  } catch (...) {
    return std::make_exception_ptr(c10::Error("commhost: an op failed with a non-standard exception", ""));
  }
}

commhost::DType toDType(at::ScalarType type, bool& ok) {
  ok = true;
  switch (type) {
    case at::kBool: return commhost::DType::Bool;
    case at::kChar: return commhost::DType::Int8;
    case at::kByte: return commhost::DType::UInt8;
    case at::kInt: return commhost::DType::Int32;
    case at::kLong: return commhost::DType::Int64;
    case at::kHalf: return commhost::DType::Float16;
    case at::kBFloat16: return commhost::DType::BFloat16;
    case at::kFloat: return commhost::DType::Float32;
    case at::kDouble: return commhost::DType::Float64;
    default: ok = false; return commhost::DType::Float32;
  }
}

// The dtype as Python spells it ("torch.int16"), for messages.
std::string pythonName(at::ScalarType type) {
  switch (type) {
    case at::kShort: return "torch.int16";
    case at::kComplexHalf: return "torch.complex32";
    case at::kQInt8: return "torch.qint8";
    case at::kQUInt8: return "torch.quint8";
    case at::kQInt32: return "torch.qint32";
    default: return std::string("torch.") + c10::toString(type);
  }
}

commhost::Millis toTimeout(std::chrono::milliseconds timeout) {
  // c10d's kUnsetTimeout (-1) and 0 both mean the group's own group.timeout.
  return timeout.count() > 0 ? timeout : commhost::Millis(0);
}

}  // namespace

// ---------------------------------------------------------------------------------------
// TorchWork

TorchWork::TorchWork(int rank, c10d::OpType type, commhost::WorkPtr work, std::vector<at::Tensor> outputs,
                     std::vector<Staged> staged)
    : c10d::Work(rank, type),
      work_(std::move(work)),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
  // Completed from the backend thread that finishes the op (or inline when it already
  // has), so DDP's bucket callbacks run as soon as the allreduce lands, without a thread
  // per op. The callback holds the future and the outputs, never this Work.
  // The outputs move into the future's value, so the callback holds no tensor once it ran
  // (it may be destroyed on a backend thread; see view() on why that matters).
  // A staged output is written back first: a caller that sees the future complete (or
  // wait() return) reads its own tensor. Its tensor is among the outputs the future keeps,
  // so dropping the pair here never drops a Python tensor's last reference.
  work_->future()->whenDone(
      [future = future_, outputs = outputs_, staged = std::move(staged)](commhost::Future& done) mutable {
        try {
          if (auto error = done.error()) {
            future->setError(asC10(error));
          } else {
            for (auto& s : staged) s.tensor.copy_(s.copy);
            future->markCompleted(c10::IValue(std::move(outputs)));
          }
          staged.clear();
          outputs.clear();
        } catch (const std::exception&) {
          // A torch callback failing inside markCompleted is recorded in its own child
          // future; nothing may escape into the commhost backend thread.
        }
      });
}

bool TorchWork::isCompleted() { return future_->completed(); }

bool TorchWork::isSuccess() const { return future_->completed() && !future_->hasError(); }

std::exception_ptr TorchWork::exception() const {
  return future_->completed() && future_->hasError() ? future_->exception_ptr() : nullptr;
}

int TorchWork::sourceRank() const { return work_->sourceRank(); }

std::vector<at::Tensor> TorchWork::result() { return outputs_; }

bool TorchWork::wait(std::chrono::milliseconds timeout) {
  try {
    work_->wait(toTimeout(timeout));
  } catch (const c10::Error&) {
    throw;
  } catch (const std::exception& e) {
    throw c10::Error(e.what(), "");
  }
  // The commhost work is done; its whenDone callback marks the torch future right after,
  // so a caller that reads getFuture()->value() next finds it complete.
  future_->wait();
  return true;
}

void TorchWork::abort() {
  work_->abort("aborted through torch.distributed Work.abort() on rank " + std::to_string(rank_));
}

c10::intrusive_ptr<c10::ivalue::Future> TorchWork::getFuture() { return future_; }

// ---------------------------------------------------------------------------------------
// TorchProcessGroup: argument conversion

namespace {

// "[group main rank 1] allreduce: " for the errors raised here, before commhost sees the call.
std::string prefix(const commhost::ProcessGroup& g, const char* op) {
  return commhost::ErrorContext{g.name(), g.rank(), op}.format();
}

// The non-contiguous tensors of the call being issued on this thread (TorchProcessGroup::run
// sets it around the call): view() stages each through a contiguous copy.
thread_local std::vector<Staged>* tlStaged = nullptr;

// Points tlStaged at one call's list for as long as the call is being issued.
struct StagingScope {
  explicit StagingScope(std::vector<Staged>* list) { tlStaged = list; }
  ~StagingScope() { tlStaged = nullptr; }
  StagingScope(const StagingScope&) = delete;
  StagingScope& operator=(const StagingScope&) = delete;
};

// Whether the op writes a tensor (its copy goes back) or only reads it.
enum class Role { Written, Read };

// A view of `tensor`'s memory that keeps `tensor` alive; refuses what commhost cannot take,
// as c10d's backends do. A non-contiguous tensor is taken through a contiguous copy, as
// c10d's gloo does (zero-copy stays the rule for contiguous ones).
commhost::Tensor view(const commhost::ProcessGroup& g, const char* op, const at::Tensor& given, const char* what,
                      int64_t index = -1, Role role = Role::Written) {
  at::Tensor tensor = given;
  const std::string name = index < 0 ? std::string(what) : std::string(what) + "[" + std::to_string(index) + "]";
  TORCH_CHECK(tensor.defined(), prefix(g, op), name, " is an undefined tensor; pass a real tensor");
  TORCH_CHECK(tensor.layout() == at::kStrided, prefix(g, op), name, " has layout ", tensor.layout(),
              "; the commhost backend takes dense (strided) tensors only");
  TORCH_CHECK(!tensor.is_conj(), prefix(g, op), name,
              " is a lazily conjugated view; call tensor.resolve_conj() before the collective");
  if (!tensor.is_contiguous()) {
    TORCH_CHECK(tlStaged != nullptr, prefix(g, op), name,
                " is not contiguous; pass tensor.contiguous() and copy the result back");
    const at::Tensor copy = tensor.contiguous();
    if (role == Role::Written) tlStaged->push_back({tensor, copy});
    tensor = copy;
  }
  // Complex tensors travel as their real view: [.., 2] of float/double, the same memory.
  const at::Tensor t = tensor.is_complex() ? at::view_as_real(tensor) : tensor;
  bool ok = false;
  const commhost::DType dtype = toDType(t.scalar_type(), ok);
  TORCH_CHECK(ok, prefix(g, op), name, " has dtype ", pythonName(tensor.scalar_type()),
              ", which commhost does not carry; use bool, int8, uint8, int32, int64, float16, bfloat16, "
              "float32, float64, complex64 or complex128");
  commhost::Device device;
  if (t.is_cpu()) {
    device = commhost::Device::cpu();
  } else if (t.is_cuda()) {
    device = commhost::Device::cuda(t.get_device());
  } else {
    TORCH_CHECK(false, prefix(g, op), name, " is on device ", t.device(),
                "; the commhost backend takes CPU (and CUDA) tensors");
  }
  commhost::Shape shape;
  if (t.dim() <= commhost::Shape::kMaxDims) {
    for (int64_t d : t.sizes()) shape.push(d);
  } else {
    shape.push(t.numel());  // contiguous: a flat view of the same elements
  }
  // The view keeps the tensor's storage (not the tensor) alive: commhost may drop the last
  // reference on a backend thread, and a TensorImpl whose Python object was collected
  // needs the GIL to die, which would deadlock against a thread holding the GIL and
  // waiting on commhost. A StorageImpl (torch 1.13) has no Python object.
  std::shared_ptr<void> owner = t.has_storage() ? std::shared_ptr<void>(std::make_shared<c10::Storage>(t.storage()))
                                                : std::shared_ptr<void>(std::make_shared<at::Tensor>(t));
  return commhost::Tensor::fromBlob(t.data_ptr(), shape, dtype, device, std::move(owner));
}

std::vector<commhost::Tensor> views(const commhost::ProcessGroup& g, const char* op, const std::vector<at::Tensor>& ts,
                                    const char* what, Role role = Role::Written) {
  std::vector<commhost::Tensor> out;
  out.reserve(ts.size());
  for (size_t i = 0; i < ts.size(); ++i) out.push_back(view(g, op, ts[i], what, static_cast<int64_t>(i), role));
  return out;
}

// c10d passes a list per call (one tensor per device); a commhost process drives one device.
const at::Tensor& single(const commhost::ProcessGroup& g, const char* op, const std::vector<at::Tensor>& ts) {
  TORCH_CHECK(ts.size() == 1, prefix(g, op), "got ", ts.size(),
              " tensors; the commhost backend takes exactly one tensor per call (one device per process)");
  return ts[0];
}

commhost::ReduceOp toReduceOp(const commhost::ProcessGroup& g, const char* op, const c10d::ReduceOp& r, bool complex) {
  commhost::ReduceOp out;
  switch (r.op_) {
    case c10d::ReduceOp::SUM: out = commhost::ReduceOp::Sum; break;
    case c10d::ReduceOp::AVG: out = commhost::ReduceOp::Avg; break;
    case c10d::ReduceOp::PRODUCT: out = commhost::ReduceOp::Product; break;
    case c10d::ReduceOp::MIN: out = commhost::ReduceOp::Min; break;
    case c10d::ReduceOp::MAX: out = commhost::ReduceOp::Max; break;
    case c10d::ReduceOp::BAND: out = commhost::ReduceOp::BAnd; break;
    case c10d::ReduceOp::BOR: out = commhost::ReduceOp::BOr; break;
    case c10d::ReduceOp::BXOR: out = commhost::ReduceOp::BXor; break;
    case c10d::ReduceOp::PREMUL_SUM: {
      auto* s = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(r.supplement_.get());
      TORCH_CHECK(s != nullptr && s->tensor_factors.empty(), prefix(g, op),
                  "PREMUL_SUM with a tensor factor is not supported; pass a Python float factor");
      out = commhost::ReduceOp::preMulSum(s->double_factor);
      break;
    }
    default: TORCH_CHECK(false, prefix(g, op), "unknown reduce op ", static_cast<int>(r.op_));
  }
  // A complex number's real and imaginary parts add independently; nothing else does.
  TORCH_CHECK(!complex || out.kind == commhost::ReduceOp::Sum || out.kind == commhost::ReduceOp::Avg ||
                  out.kind == commhost::ReduceOp::PreMulSum,
              prefix(g, op), "reduce op ", commhost::reduceOpName(out.kind),
              " is not defined for complex tensors; use SUM or AVG");
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// TorchProcessGroup: ops

TorchProcessGroup::TorchProcessGroup(std::shared_ptr<commhost::ProcessGroup> group)
    : c10d::ProcessGroup(group->rank(), group->size()), group_(std::move(group)) {}

TorchProcessGroup::~TorchProcessGroup() = default;

template <class F>
c10::intrusive_ptr<c10d::Work> TorchProcessGroup::run(c10d::OpType type, std::vector<at::Tensor> outputs, F&& issue) {
  commhost::WorkPtr work;
  std::vector<Staged> staged;
  try {
    std::lock_guard<std::mutex> lock(issueMutex_);
    const StagingScope scope(&staged);
    work = issue();
  } catch (const c10::Error&) {
    throw;
  } catch (const std::exception& e) {
    throw c10::Error(e.what(), "");
  }
  return c10::make_intrusive<TorchWork>(getRank(), type, std::move(work), std::move(outputs), std::move(staged));
}

c10::intrusive_ptr<c10d::Work> TorchProcessGroup::broadcast(std::vector<at::Tensor>& tensors,
                                                            const c10d::BroadcastOptions& opts) {
  const at::Tensor& t = single(*group_, "broadcast", tensors);
  return run(c10d::OpType::BROADCAST, tensors, [&] {
    commhost::Tensor v = view(*group_, "broadcast", t, "tensor");
    commhost::BroadcastOptions o;
    o.root = static_cast<int>(opts.rootRank);
    o.timeout = toTimeout(opts.timeout);
    return group_->broadcast(v, o);
  });
}

c10::intrusive_ptr<c10d::Work> TorchProcessGroup::allreduce(std::vector<at::Tensor>& tensors,
                                                            const c10d::AllreduceOptions& opts) {
  const at::Tensor& t = single(*group_, "allreduce", tensors);
  return run(c10d::OpType::ALLREDUCE, tensors, [&] {
    commhost::AllreduceOptions o;
    o.reduceOp = toReduceOp(*group_, "allreduce", opts.reduceOp, t.is_complex());
    o.timeout = toTimeout(opts.timeout);
    commhost::Tensor v = view(*group_, "allreduce", t, "tensor");
    return group_->allreduce(v, o);
  });
}

c10::intrusive_ptr<c10d::Work> TorchProcessGroup::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                      const c10d::AllreduceCoalescedOptions& opts) {
  return run(c10d::OpType::ALLREDUCE_COALESCED, tensors, [&] {
    commhost::AllreduceCoalescedOptions o;
    bool complex = false;
    for (const auto& t : tensors) complex = complex || t.is_complex();
    o.reduceOp = toReduceOp(*group_, "allreduce_coalesced", opts.reduceOp, complex);
    o.timeout = toTimeout(opts.timeout);
    std::vector<commhost::Tensor> v = views(*group_, "allreduce_coalesced", tensors, "tensors");
    return group_->allreduceCoalesced(v, o);
  });
}

c10::intrusive_ptr<c10d::Work> TorchProcessGroup::reduce(std::vector<at::Tensor>& tensors,
                                                         const c10d::ReduceOptions& opts) {
  const at::Tensor& t = single(*group_, "reduce", tensors);
  return run(c10d::OpType::REDUCE, tensors, [&] {
    commhost::ReduceOptions o;
    o.root = static_cast<int>(opts.rootRank);
    o.reduceOp = toReduceOp(*group_, "reduce", opts.reduceOp, t.is_complex());
    o.timeout = toTimeout(opts.timeout);
    commhost::Tensor v = view(*group_, "reduce", t, "tensor");
    return group_->reduce(v, o);
  });
}

c10::intrusive_ptr<c10d::Work> TorchProcessGroup::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllgatherOptions& opts) {
  const at::Tensor& in = single(*group_, "allgather", inputs);
  TORCH_CHECK(outputs.size() == 1, prefix(*group_, "allgather"), "got ", outputs.size(),
              " output lists; pass one list of world-size tensors");
  return run(c10d::OpType::ALLGATHER, outputs[0], [&] {
    std::vector<commhost::Tensor> outs = views(*group_, "allgather", outputs[0], "outputs");
    commhost::AllgatherOptions o;
    o.timeout = toTimeout(opts.timeout);
    return group_->allgather(outs, view(*group_, "allgather", in, "input", -1, Role::Read), o);
  });
}

c10::intrusive_ptr<c10d::Work> TorchProcessGroup::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                  const c10d::AllgatherOptions& opts) {
  return run(c10d::OpType::_ALLGATHER_BASE, {output}, [&] {
    commhost::Tensor out = view(*group_, "allgather_into_tensor", output, "output");
    commhost::AllgatherOptions o;
    o.timeout = toTimeout(opts.timeout);
    return group_->allgatherIntoTensor(out, view(*group_, "allgather_into_tensor", input, "input", -1, Role::Read), o);
  });
}

c10::intrusive_ptr<c10d::Work> TorchProcessGroup::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputLists,
                                                                      std::vector<at::Tensor>& inputs,
                                                                      const c10d::AllgatherOptions& opts) {
  // torch lays the outputs out per rank (outputLists[rank][input]); commhost per input
  // (outputs[input][rank]): the same tensors, indexed the other way round.
  const int world = group_->size();
  TORCH_CHECK(static_cast<int>(outputLists.size()) == world, prefix(*group_, "allgather_coalesced"), "got ",
              outputLists.size(), " output lists; pass one list per rank (", world, ")");
  std::vector<at::Tensor> flat;
  for (const auto& list : outputLists) {
    TORCH_CHECK(list.size() == inputs.size(), prefix(*group_, "allgather_coalesced"), "an output list holds ",
                list.size(), " tensors; each must hold one per input (", inputs.size(), ")");
    flat.insert(flat.end(), list.begin(), list.end());
  }
  return run(c10d::OpType::ALLGATHER_COALESCED, std::move(flat), [&] {
    std::vector<std::vector<commhost::Tensor>> outs(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i)
      for (int r = 0; r < world; ++r)
        outs[i].push_back(view(*group_, "allgather_coalesced", outputLists[r][i], "output", r));
    commhost::AllgatherOptions o;
    o.timeout = toTimeout(opts.timeout);
    return group_->allgatherCoalesced(outs, views(*group_, "allgather_coalesced", inputs, "inputs", Role::Read), o);
  });
}

c10::intrusive_ptr<c10d::Work> TorchProcessGroup::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                         std::vector<at::Tensor>& inputs,
                                                         const c10d::GatherOptions& opts) {
  const at::Tensor& in = single(*group_, "gather", inputs);
  TORCH_CHECK(outputs.size() <= 1, prefix(*group_, "gather"), "got ", outputs.size(),
              " output lists; pass one list of world-size tensors on the root, none elsewhere");
  std::vector<at::Tensor> outList = outputs.empty() ? std::vector<at::Tensor>{} : outputs[0];
  return run(c10d::OpType::GATHER, outList, [&] {
    std::vector<commhost::Tensor> outs = views(*group_, "gather", outList, "outputs");
    commhost::GatherOptions o;
    o.root = static_cast<int>(opts.rootRank);
    o.timeout = toTimeout(opts.timeout);
    return group_->gather(outs, view(*group_, "gather", in, "input", -1, Role::Read), o);
  });
}

c10::intrusive_ptr<c10d::Work> TorchProcessGroup::scatter(std::vector<at::Tensor>& outputs,
                                                          std::vector<std::vector<at::Tensor>>& inputs,
                                                          const c10d::ScatterOptions& opts) {
  const at::Tensor& out = single(*group_, "scatter", outputs);
  TORCH_CHECK(inputs.size() <= 1, prefix(*group_, "scatter"), "got ", inputs.size(),
              " input lists; pass one list of world-size tensors on the root, none elsewhere");
  std::vector<at::Tensor> inList = inputs.empty() ? std::vector<at::Tensor>{} : inputs[0];
  return run(c10d::OpType::SCATTER, outputs, [&] {
    commhost::Tensor v = view(*group_, "scatter", out, "output");
    commhost::ScatterOptions o;
    o.root = static_cast<int>(opts.rootRank);
    o.timeout = toTimeout(opts.timeout);
    return group_->scatter(v, views(*group_, "scatter", inList, "inputs", Role::Read), o);
  });
}

c10::intrusive_ptr<c10d::Work> TorchProcessGroup::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                 std::vector<std::vector<at::Tensor>>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) {
  const at::Tensor& out = single(*group_, "reduce_scatter", outputs);
  TORCH_CHECK(inputs.size() == 1, prefix(*group_, "reduce_scatter"), "got ", inputs.size(),
              " input lists; pass one list of world-size tensors");
  return run(c10d::OpType::REDUCE_SCATTER, outputs, [&] {
    commhost::ReduceScatterOptions o;
    o.reduceOp = toReduceOp(*group_, "reduce_scatter", opts.reduceOp, out.is_complex());
    o.timeout = toTimeout(opts.timeout);
    commhost::Tensor v = view(*group_, "reduce_scatter", out, "output");
    return group_->reduceScatter(v, views(*group_, "reduce_scatter", inputs[0], "inputs", Role::Read), o);
  });
}

c10::intrusive_ptr<c10d::Work> TorchProcessGroup::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                       const c10d::ReduceScatterOptions& opts) {
  return run(c10d::OpType::_REDUCE_SCATTER_BASE, {output}, [&] {
    commhost::ReduceScatterOptions o;
    o.reduceOp = toReduceOp(*group_, "reduce_scatter_tensor", opts.reduceOp, output.is_complex());
    o.timeout = toTimeout(opts.timeout);
    commhost::Tensor v = view(*group_, "reduce_scatter_tensor", output, "output");
    return group_->reduceScatterTensor(v, view(*group_, "reduce_scatter_tensor", input, "input", -1, Role::Read), o);
  });
}

c10::intrusive_ptr<c10d::Work> TorchProcessGroup::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                std::vector<int64_t>& outputSplitSizes,
                                                                std::vector<int64_t>& inputSplitSizes,
                                                                const c10d::AllToAllOptions& opts) {
  return run(c10d::OpType::ALLTOALL_BASE, {output}, [&] {
    commhost::AlltoallSingleOptions o;
    o.outputSplitSizes = outputSplitSizes;
    o.inputSplitSizes = inputSplitSizes;
    o.timeout = toTimeout(opts.timeout);
    commhost::Tensor v = view(*group_, "alltoall_single", output, "output");
    return group_->alltoallSingle(v, view(*group_, "alltoall_single", input, "input", -1, Role::Read), o);
  });
}

c10::intrusive_ptr<c10d::Work> TorchProcessGroup::alltoall(std::vector<at::Tensor>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllToAllOptions& opts) {
  return run(c10d::OpType::ALLTOALL, outputs, [&] {
    std::vector<commhost::Tensor> outs = views(*group_, "alltoall", outputs, "outputs");
    commhost::AlltoallOptions o;
    o.timeout = toTimeout(opts.timeout);
    return group_->alltoall(outs, views(*group_, "alltoall", inputs, "inputs", Role::Read), o);
  });
}

void TorchProcessGroup::monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) {
  commhost::MonitoredBarrierOptions o;
  o.timeout = toTimeout(opts.timeout);
  o.waitAllRanks = waitAllRanks;
  try {
    std::lock_guard<std::mutex> lock(issueMutex_);
    group_->monitoredBarrier(o);
  } catch (const std::exception& e) {
    throw c10::Error(e.what(), "");
  }
}

c10::intrusive_ptr<c10d::Work> TorchProcessGroup::send(std::vector<at::Tensor>& tensors, int dstRank, int tag) {
  const at::Tensor& t = single(*group_, "send", tensors);
  return run(c10d::OpType::SEND, tensors, [&] {
    commhost::SendOptions o;
    o.tag = tag;
    return group_->send(view(*group_, "send", t, "tensor", -1, Role::Read), dstRank, o);
  });
}

c10::intrusive_ptr<c10d::Work> TorchProcessGroup::recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) {
  const at::Tensor& t = single(*group_, "recv", tensors);
  return run(c10d::OpType::RECV, tensors, [&] {
    commhost::RecvOptions o;
    o.tag = tag;
    commhost::Tensor v = view(*group_, "recv", t, "tensor");
    return group_->recv(v, srcRank, o);
  });
}

c10::intrusive_ptr<c10d::Work> TorchProcessGroup::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  const at::Tensor& t = single(*group_, "recv_any_source", tensors);
  return run(c10d::OpType::RECVANYSOURCE, tensors, [&] {
    commhost::RecvOptions o;
    o.tag = tag;
    commhost::Tensor v = view(*group_, "recv_any_source", t, "tensor");
    return group_->recvAnySource(v, o);
  });
}

c10::intrusive_ptr<c10d::Work> TorchProcessGroup::barrier(const c10d::BarrierOptions& opts) {
  return run(c10d::OpType::BARRIER, {}, [&] {
    commhost::BarrierOptions o;
    o.timeout = toTimeout(opts.timeout);
    return group_->barrier(o);
  });
}

}  // namespace commhost_torch
