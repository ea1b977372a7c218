// SPDX-License-Identifier: Apache-2.0
// TorchBackend and TorchWork: every c10d op issued on a commhost::ProcessGroup.
#include "backend.h"

#include <Python.h>  // the GIL: ~TorchBackend lets it go

#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <type_traits>
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
    return std::make_exception_ptr(compat::error(e.what()));
  } catch (...) {
    return std::make_exception_ptr(compat::error("commhost: an op failed with a non-standard exception"));
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

void Issued::append(const Issued& other) {
  works.insert(works.end(), other.works.begin(), other.works.end());
  outputs.insert(outputs.end(), other.outputs.begin(), other.outputs.end());
  staged.insert(staged.end(), other.staged.begin(), other.staged.end());
}

namespace {

// Completes a TorchWork's torch future once the last of its commhost works is done. Shared
// by the works' callbacks; holds the outputs and staged copies until then, never the Work.
struct Completion {
  Completion(c10::intrusive_ptr<c10::ivalue::Future> f, std::vector<at::Tensor> o, std::vector<Staged> s, size_t n)
      : future(std::move(f)), outputs(std::move(o)), staged(std::move(s)), left(n) {}

  // Called by each work's callback (a commhost backend thread, or inline when done).
  void done(const commhost::Future& work) {
    if (auto e = work.error()) {
      commhost::MutexLock lock(&mutex);
      if (!error) error = e;
    }
    if (left.fetch_sub(1, std::memory_order_acq_rel) == 1) finish();
  }

  // A staged output is written back first: a caller that sees the future complete (or
  // wait() return) reads its own tensor. Its tensor is among the outputs the future keeps,
  // so dropping the pair here never drops a Python tensor's last reference. The outputs
  // move into the future's value, so no tensor stays here once it ran (this may be
  // destroyed on a backend thread; see view() on why that matters). A failed call's
  // outputs die here, and the future may die on a backend thread too: that thread then
  // takes the GIL to free a tensor's Python object, which is why ~TorchBackend lets it go.
  void finish() {
    try {
      std::exception_ptr failed;
      {
        commhost::MutexLock lock(&mutex);
        failed = error;
      }
      if (failed) {
        future->setError(asC10(failed));
      } else {
        for (auto& s : staged) s.tensor.copy_(s.copy);
        future->markCompleted(c10::IValue(std::move(outputs)));
      }
    } catch (const std::exception&) {
      // A torch callback failing inside markCompleted is recorded in its own child
      // future; nothing may escape into the commhost backend thread.
    }
    staged.clear();
    outputs.clear();
  }

  c10::intrusive_ptr<c10::ivalue::Future> future;
  std::vector<at::Tensor> outputs;
  std::vector<Staged> staged;
  std::atomic<size_t> left;
  commhost::Mutex mutex;
  std::exception_ptr error GUARDED_BY(mutex);  // the first failed work's
};

}  // namespace

TorchWork::TorchWork(int rank, c10d::OpType type, Issued issued)
    : c10d::Work(rank, type),
      works_(std::move(issued.works)),
      outputs_(issued.outputs),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
  // Completed from the backend thread that finishes the last op (or inline when all have),
  // so DDP's bucket callbacks run as soon as the allreduce lands, without a thread per op.
  auto completion = std::make_shared<Completion>(future_, std::move(issued.outputs), std::move(issued.staged),
                                                 works_.size());
  if (works_.empty()) completion->finish();  // an empty coalescing block
  for (const auto& work : works_)
    work->future()->whenDone([completion](commhost::Future& done) { completion->done(done); });
}

bool TorchWork::isCompleted() { return future_->completed(); }

bool TorchWork::isSuccess() const { return future_->completed() && !future_->hasError(); }

std::exception_ptr TorchWork::exception() const {
  return future_->completed() && future_->hasError() ? future_->exception_ptr() : nullptr;
}

int TorchWork::sourceRank() const { return works_.empty() ? -1 : works_.front()->sourceRank(); }

std::vector<at::Tensor> TorchWork::result() { return outputs_; }

bool TorchWork::wait(std::chrono::milliseconds timeout) {
  try {
    for (const auto& work : works_) work->wait(toTimeout(timeout));
  } catch (const c10::Error&) {
    throw;
  } catch (const std::exception& e) {
    throw compat::error(e.what());
  }
  // The commhost work is done; its whenDone callback marks the torch future right after,
  // so a caller that reads getFuture()->value() next finds it complete.
  future_->wait();
  return true;
}

void TorchWork::abort() {
  for (const auto& work : works_)
    work->abort("aborted through torch.distributed Work.abort() on rank " + std::to_string(rank_));
}

c10::intrusive_ptr<c10::ivalue::Future> TorchWork::getFuture() { return future_; }

// ---------------------------------------------------------------------------------------
// TorchBackend: argument conversion

namespace {

// "[group main rank 1] allreduce: " for the errors raised here, before commhost sees the call.
std::string prefix(const commhost::ProcessGroup& g, const char* op) {
  return commhost::ErrorContext{g.name(), g.rank(), op}.format();
}

// The non-contiguous tensors of the call being issued on this thread (TorchBackend::run
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

bool anyComplex(const std::vector<at::Tensor>& ts) {
  return std::any_of(ts.begin(), ts.end(), [](const at::Tensor& t) { return t.is_complex(); });
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
      TORCH_CHECK(s != nullptr && !compat::hasTensorFactor(*s), prefix(g, op),
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

// A flat allgather of `in` (contiguous) into [world, in.sizes()...], waited for.
at::Tensor gatherWaited(commhost::ProcessGroup& g, const at::Tensor& in, const commhost::AllgatherOptions& o,
                        std::vector<commhost::WorkPtr>& works) {
  std::vector<int64_t> sizes = in.sizes().vec();
  sizes.insert(sizes.begin(), g.size());
  at::Tensor out = at::empty(sizes, in.options());
  commhost::Tensor ov = view(g, "allreduce", out.view({-1}), "sparse allreduce's gathered part");
  works.push_back(g.allgatherIntoTensor(ov, view(g, "allreduce", in.reshape({-1}), "sparse part", -1, Role::Read), o));
  works.back()->wait();
  return out;
}

// Sparse allreduce as c10d's gloo does it: every rank's coalesced indices and values are
// gathered (padded to the largest nnz), summed as sparse tensors and coalesced, and the
// sum replaces the caller's tensor. SUM only, as gloo. The ranks' shapes are compared
// first. Runs to completion in the caller's thread, under issueMutex_, so that its ops
// never interleave with another thread's; returns the finished works.
std::vector<commhost::WorkPtr> sparseAllreduce(commhost::ProcessGroup& g, at::Tensor& t,
                                               const c10d::AllreduceOptions& opts) {
  TORCH_CHECK(opts.reduceOp.op_ == c10d::ReduceOp::SUM, prefix(g, "allreduce"),
              "a sparse tensor reduces with SUM only (as c10d's gloo does); densify it (tensor.to_dense()) for "
              "other reduce ops");
  const at::Tensor input = t.coalesce();
  commhost::AllgatherOptions o;
  o.timeout = toTimeout(opts.timeout);
  std::vector<commhost::WorkPtr> works;
  // What the ranks must agree on (sparse dims, dense dims, sizes), and each rank's nnz.
  std::vector<int64_t> meta{input.sparse_dim(), input.dense_dim()};
  for (int64_t d : input.sizes()) meta.push_back(d);
  meta.push_back(input._nnz());
  const at::Tensor all = gatherWaited(g, at::tensor(meta, at::kLong), o, works);
  const int64_t m = static_cast<int64_t>(meta.size());
  int64_t maxNnz = 0;
  for (int r = 0; r < g.size(); ++r) {
    const at::Tensor theirs = all[r];
    TORCH_CHECK(at::equal(theirs.narrow(0, 0, m - 1), all[g.rank()].narrow(0, 0, m - 1)), prefix(g, "allreduce"),
                "rank ", r, "'s sparse tensor has (sparse dims, dense dims, sizes) ", theirs.narrow(0, 0, m - 1),
                " and this rank's ", all[g.rank()].narrow(0, 0, m - 1), "; every rank must pass the same shape");
    maxNnz = std::max(maxNnz, theirs[m - 1].item<int64_t>());
  }
  if (maxNnz == 0) return works;  // every rank's tensor is empty: so is the sum
  const int64_t nnz = input._nnz();
  at::Tensor indices = at::zeros({input.sparse_dim(), maxNnz}, input._indices().options());
  indices.narrow(1, 0, nnz).copy_(input._indices());
  std::vector<int64_t> valueSizes = input._values().sizes().vec();
  valueSizes[0] = maxNnz;
  at::Tensor values = at::zeros(valueSizes, input._values().options());
  values.narrow(0, 0, nnz).copy_(input._values());
  const at::Tensor allIndices = gatherWaited(g, indices, o, works);
  const at::Tensor allValues = gatherWaited(g, values, o, works);
  at::Tensor sum = at::zeros_like(input);
  for (int r = 0; r < g.size(); ++r) {
    const int64_t n = all[r][m - 1].item<int64_t>();
    sum = sum + at::sparse_coo_tensor(allIndices[r].narrow(1, 0, n), allValues[r].narrow(0, 0, n), input.sizes());
  }
  t.copy_(sum.coalesce());
  return works;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// TorchBackend: ops

TorchBackend::TorchBackend(std::shared_ptr<commhost::ProcessGroup> group)
    : compat::BackendBase(group->rank(), group->size()), group_(std::move(group)) {}

namespace {
// Lets the GIL go for its lifetime when this thread holds it (any thread may destroy a
// backend, with or without the GIL, or after the interpreter ended).
class GilReleased {
 public:
  GilReleased() {
    if (Py_IsInitialized() && PyGILState_Check()) state_ = PyEval_SaveThread();
  }
  ~GilReleased() {
    if (state_) PyEval_RestoreThread(state_);
  }
  GilReleased(const GilReleased&) = delete;
  GilReleased& operator=(const GilReleased&) = delete;

 private:
  PyThreadState* state_ = nullptr;
};
}  // namespace

// Ending the group waits for its ops in flight (each backend drains its queue) and for a
// completion hook being called. A completing op may drop the last reference to a tensor
// whose Python object torch kept alive, and a hook may be Python: either takes the GIL on
// a commhost thread. torch destroys backends with the GIL held (destroy_process_group
// clears its registry under it; a ProcessGroup dies with it), so the GIL is let go while
// the group ends, as torch's IntrusivePtrNoGilDestructor does for its Python holders.
// tests/python/torch/test_teardown.py hung here on torch 2.6 before.
TorchBackend::~TorchBackend() {
  const GilReleased released;
  if (completionHook_ >= 0) group_->removeCompletionHook(completionHook_);
  group_.reset();
}

template <class F>
c10::intrusive_ptr<c10d::Work> TorchBackend::run(c10d::OpType type, std::vector<at::Tensor> outputs, F&& issue) {
  Issued issued;
  issued.outputs = std::move(outputs);
  try {
    commhost::MutexLock lock(&issueMutex_);
    const StagingScope scope(&issued.staged);
    auto works = issue();  // one WorkPtr, or a vector of them for a coalesced call
    if constexpr (std::is_same_v<decltype(works), commhost::WorkPtr>) issued.works.push_back(std::move(works));
    else issued.works = std::move(works);
    track(issued);
  } catch (const c10::Error&) {
    throw;
  } catch (const std::exception& e) {
    throw compat::error(e.what());
  }
  return c10::make_intrusive<TorchWork>(getRank(), type, std::move(issued));
}

void TorchBackend::track(const Issued& issued) {
  if (coalescing_) coalesced_.append(issued);
  if constexpr (!compat::kBackendApi) return;  // waitForPendingWorks is torch 2.x's
  if (pending_.size() >= 64)                   // bounded: drop what has completed (or been dropped)
    pending_.erase(std::remove_if(pending_.begin(), pending_.end(),
                                  [](const std::weak_ptr<commhost::Work>& w) {
                                    auto work = w.lock();
                                    return !work || work->future()->isCompleted();
                                  }),
                   pending_.end());
  for (const auto& work : issued.works) pending_.push_back(work);
}

c10::intrusive_ptr<c10d::Work> TorchBackend::broadcast(std::vector<at::Tensor>& tensors,
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

c10::intrusive_ptr<c10d::Work> TorchBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                       const c10d::AllreduceOptions& opts) {
  single(*group_, "allreduce", tensors);  // exactly one
  at::Tensor& t = tensors[0];
  if (t.is_sparse()) return run(c10d::OpType::ALLREDUCE, tensors, [&] { return sparseAllreduce(*group_, t, opts); });
  return run(c10d::OpType::ALLREDUCE, tensors, [&] {
    commhost::AllreduceOptions o;
    o.reduceOp = toReduceOp(*group_, "allreduce", opts.reduceOp, t.is_complex());
    o.timeout = toTimeout(opts.timeout);
    commhost::Tensor v = view(*group_, "allreduce", t, "tensor");
    return group_->allreduce(v, o);
  });
}

c10::intrusive_ptr<c10d::Work> TorchBackend::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                 const c10d::AllreduceCoalescedOptions& opts) {
  return run(c10d::OpType::ALLREDUCE_COALESCED, tensors, [&] {
    commhost::AllreduceCoalescedOptions o;
    o.reduceOp = toReduceOp(*group_, "allreduce_coalesced", opts.reduceOp, anyComplex(tensors));
    o.timeout = toTimeout(opts.timeout);
    std::vector<commhost::Tensor> v = views(*group_, "allreduce_coalesced", tensors, "tensors");
    return group_->allreduceCoalesced(v, o);
  });
}

c10::intrusive_ptr<c10d::Work> TorchBackend::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
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

c10::intrusive_ptr<c10d::Work> TorchBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
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

c10::intrusive_ptr<c10d::Work> TorchBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                             const c10d::AllgatherOptions& opts) {
  return run(c10d::OpType::_ALLGATHER_BASE, {output}, [&] {
    commhost::Tensor out = view(*group_, "allgather_into_tensor", output, "output");
    commhost::AllgatherOptions o;
    o.timeout = toTimeout(opts.timeout);
    return group_->allgatherIntoTensor(out, view(*group_, "allgather_into_tensor", input, "input", -1, Role::Read), o);
  });
}

c10::intrusive_ptr<c10d::Work> TorchBackend::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputLists,
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

c10::intrusive_ptr<c10d::Work> TorchBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                    std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) {
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

c10::intrusive_ptr<c10d::Work> TorchBackend::scatter(std::vector<at::Tensor>& outputs,
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

c10::intrusive_ptr<c10d::Work> TorchBackend::reduce_scatter(std::vector<at::Tensor>& outputs,
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

c10::intrusive_ptr<c10d::Work> TorchBackend::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                  const c10d::ReduceScatterOptions& opts) {
  return run(c10d::OpType::_REDUCE_SCATTER_BASE, {output}, [&] {
    commhost::ReduceScatterOptions o;
    o.reduceOp = toReduceOp(*group_, "reduce_scatter_tensor", opts.reduceOp, output.is_complex());
    o.timeout = toTimeout(opts.timeout);
    commhost::Tensor v = view(*group_, "reduce_scatter_tensor", output, "output");
    return group_->reduceScatterTensor(v, view(*group_, "reduce_scatter_tensor", input, "input", -1, Role::Read), o);
  });
}

c10::intrusive_ptr<c10d::Work> TorchBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
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

c10::intrusive_ptr<c10d::Work> TorchBackend::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                                      const c10d::AllToAllOptions& opts) {
  return run(c10d::OpType::ALLTOALL, outputs, [&] {
    std::vector<commhost::Tensor> outs = views(*group_, "alltoall", outputs, "outputs");
    commhost::AlltoallOptions o;
    o.timeout = toTimeout(opts.timeout);
    return group_->alltoall(outs, views(*group_, "alltoall", inputs, "inputs", Role::Read), o);
  });
}

void TorchBackend::monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) {
  commhost::MonitoredBarrierOptions o;
  o.timeout = toTimeout(opts.timeout);
  o.waitAllRanks = waitAllRanks;
  try {
    commhost::MutexLock lock(&issueMutex_);
    group_->monitoredBarrier(o);
  } catch (const std::exception& e) {
    throw compat::error(e.what());
  }
}

c10::intrusive_ptr<c10d::Work> TorchBackend::send(std::vector<at::Tensor>& tensors, int dstRank, int tag) {
  const at::Tensor& t = single(*group_, "send", tensors);
  return run(c10d::OpType::SEND, tensors, [&] {
    commhost::SendOptions o;
    o.tag = tag;
    return group_->send(view(*group_, "send", t, "tensor", -1, Role::Read), dstRank, o);
  });
}

c10::intrusive_ptr<c10d::Work> TorchBackend::recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) {
  const at::Tensor& t = single(*group_, "recv", tensors);
  return run(c10d::OpType::RECV, tensors, [&] {
    commhost::RecvOptions o;
    o.tag = tag;
    commhost::Tensor v = view(*group_, "recv", t, "tensor");
    return group_->recv(v, srcRank, o);
  });
}

c10::intrusive_ptr<c10d::Work> TorchBackend::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  const at::Tensor& t = single(*group_, "recv_any_source", tensors);
  return run(c10d::OpType::RECVANYSOURCE, tensors, [&] {
    commhost::RecvOptions o;
    o.tag = tag;
    commhost::Tensor v = view(*group_, "recv_any_source", t, "tensor");
    return group_->recvAnySource(v, o);
  });
}

c10::intrusive_ptr<c10d::Work> TorchBackend::barrier(const c10d::BarrierOptions& opts) {
  return run(c10d::OpType::BARRIER, {}, [&] {
    commhost::BarrierOptions o;
    o.timeout = toTimeout(opts.timeout);
    return group_->barrier(o);
  });
}

// ---------------------------------------------------------------------------------------
// torch 2.x's Backend surface (the one place the ops differ by torch version)

#if TORCH_VERSION_MAJOR >= 2

void TorchBackend::startCoalescing() {
  commhost::MutexLock lock(&issueMutex_);
  TORCH_CHECK(!coalescing_, prefix(*group_, "start_coalescing"),
              "a coalescing block is already open on this group; end it (endCoalescing) before starting another");
  coalescing_ = true;
  coalesced_ = Issued{};
}

c10::intrusive_ptr<c10d::Work> TorchBackend::endCoalescing() {
  Issued issued;
  {
    commhost::MutexLock lock(&issueMutex_);
    TORCH_CHECK(coalescing_, prefix(*group_, "end_coalescing"),
                "no coalescing block is open on this group; call startCoalescing first");
    coalescing_ = false;
    issued = std::move(coalesced_);
    coalesced_ = Issued{};
  }
  return c10::make_intrusive<TorchWork>(getRank(), c10d::OpType::COALESCED, std::move(issued));
}

namespace {

// A tensor-coalesced call (torch 2.x): one commhost op per (output, input) pair, issued in
// order by `issueOne(output view, input view)`.
template <class IssueOne>
std::vector<commhost::WorkPtr> perPair(const commhost::ProcessGroup& g, const char* op,
                                       const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
                                       IssueOne&& issueOne) {
  std::vector<commhost::WorkPtr> works;
  for (size_t i = 0; i < inputs.size(); ++i) {
    commhost::Tensor out = view(g, op, outputs[i], "outputs", static_cast<int64_t>(i));
    works.push_back(issueOne(out, view(g, op, inputs[i], "inputs", static_cast<int64_t>(i), Role::Read)));
  }
  return works;
}

void checkPairs(const commhost::ProcessGroup& g, const char* op, const std::vector<at::Tensor>& outputs,
                const std::vector<at::Tensor>& inputs) {
  TORCH_CHECK(outputs.size() == inputs.size(), prefix(g, op), "got ", outputs.size(), " outputs and ", inputs.size(),
              " inputs; pass one output per input");
}

}  // namespace

c10::intrusive_ptr<c10d::Work> TorchBackend::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                             std::vector<at::Tensor>& inputs,
                                                                             const c10d::AllgatherOptions& opts) {
  constexpr const char* op = "allgather_into_tensor_coalesced";
  checkPairs(*group_, op, outputs, inputs);
  return run(c10d::OpType::COALESCED, outputs, [&] {
    commhost::AllgatherOptions o;
    o.timeout = toTimeout(opts.timeout);
    return perPair(*group_, op, outputs, inputs, [&](commhost::Tensor& out, const commhost::Tensor& in) {
      return group_->allgatherIntoTensor(out, in, o);
    });
  });
}

c10::intrusive_ptr<c10d::Work> TorchBackend::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                             std::vector<at::Tensor>& inputs,
                                                                             const c10d::ReduceScatterOptions& opts) {
  constexpr const char* op = "reduce_scatter_tensor_coalesced";
  checkPairs(*group_, op, outputs, inputs);
  return run(c10d::OpType::COALESCED, outputs, [&] {
    commhost::ReduceScatterOptions o;
    o.reduceOp = toReduceOp(*group_, op, opts.reduceOp, anyComplex(outputs));
    o.timeout = toTimeout(opts.timeout);
    return perPair(*group_, op, outputs, inputs, [&](commhost::Tensor& out, const commhost::Tensor& in) {
      return group_->reduceScatterTensor(out, in, o);
    });
  });
}

void TorchBackend::waitForPendingWorks() {
  std::vector<std::weak_ptr<commhost::Work>> pending;
  {
    commhost::MutexLock lock(&issueMutex_);
    pending.swap(pending_);
  }
  try {
    for (const auto& w : pending)
      if (auto work = w.lock()) work->wait();
  } catch (const std::exception& e) {
    throw compat::error(e.what());
  }
}

namespace {

c10d::OpType torchOpType(commhost::OpType op) {
  switch (op) {
    case commhost::OpType::Allreduce: return c10d::OpType::ALLREDUCE;
    case commhost::OpType::AllreduceCoalesced: return c10d::OpType::ALLREDUCE_COALESCED;
    case commhost::OpType::Broadcast: return c10d::OpType::BROADCAST;
    case commhost::OpType::Reduce: return c10d::OpType::REDUCE;
    case commhost::OpType::Allgather: return c10d::OpType::ALLGATHER;
    case commhost::OpType::AllgatherIntoTensor: return c10d::OpType::_ALLGATHER_BASE;
    case commhost::OpType::AllgatherCoalesced: return c10d::OpType::ALLGATHER_COALESCED;
    case commhost::OpType::Gather: return c10d::OpType::GATHER;
    case commhost::OpType::Scatter: return c10d::OpType::SCATTER;
    case commhost::OpType::ReduceScatter: return c10d::OpType::REDUCE_SCATTER;
    case commhost::OpType::ReduceScatterTensor: return c10d::OpType::_REDUCE_SCATTER_BASE;
    case commhost::OpType::Alltoall: return c10d::OpType::ALLTOALL;
    case commhost::OpType::AlltoallSingle: return c10d::OpType::ALLTOALL_BASE;
    case commhost::OpType::Barrier: return c10d::OpType::BARRIER;
    case commhost::OpType::Send: return c10d::OpType::SEND;
    case commhost::OpType::Recv: return c10d::OpType::RECV;
    case commhost::OpType::RecvAnySource: return c10d::OpType::RECVANYSOURCE;
    default: return c10d::OpType::UNKNOWN;  // monitored_barrier has no c10d OpType
  }
}

}  // namespace

void TorchBackend::registerOnCompletionHook(std::function<void(std::shared_ptr<c10d::WorkInfo>)>&& hook) {
  TORCH_CHECK(completionHook_ < 0, prefix(*group_, "register_on_completion_hook"),
              "a completion hook is already registered on this group; torch allows one per backend");
  // commhost's hook thread calls it (torch wraps a Python hook so that it takes the GIL).
  completionHook_ = group_->addCompletionHook([hook = std::move(hook)](const commhost::CompletionEvent& ev) {
    try {
      hook(std::make_shared<c10d::WorkInfo>(torchOpType(ev.op), ev.seq, ev.start, ev.end,
                                            std::chrono::duration<float>(ev.duration)));
    } catch (const std::exception&) {
      // torch logs a failing Python hook itself; nothing may escape into the hook thread
    }
  });
}

#endif  // TORCH_VERSION_MAJOR >= 2

}  // namespace commhost_torch
