// SPDX-License-Identifier: Apache-2.0
// The Reducer (see reducer.h): buckets, the launch order, unused parameters, the rebuild.
//
// Who owns what:
// - The driving thread (the one calling the constructor, prepareForBackward, finalize,
//   the destructor) alone changes the bucket layout (buckets_, slotOf_), the options and
//   everything about finished iterations (stats_, iteration_, the static graph's sets).
//   markReady may not run while it does (markReady calls of an iteration happen between
//   that iteration's prepareForBackward and finalize), so markReady reads the layout
//   without the lock.
// - mu_ guards the state of the iteration in progress, which markReady threads share: who
//   was marked, each bucket's pending count, launch progress and its Future. A slot of a
//   bucket buffer is written by the one thread that claimed its parameter under mu_.
// - At most one thread at a time is the launcher (launching_): it calls the hook for the
//   next buckets in index order with mu_ released, so gradients keep arriving (and other
//   threads keep copying) while a bucket goes on the wire. The group sees one caller at a
//   time, in bucket order on every rank.
// - A hook's Future may complete on any thread; the continuation chained on it only
//   records the bucket's completion time, and finalize reads that after waiting on it.
//
// Behaviour the header leaves open: a parameter this rank never marked but another rank
// used (findUnusedParameters) has no tensor to write back to, so its reduced gradient is
// only in bucketView(i). With staticGraph the buckets of parameters unused in the first
// iteration are launched by prepareForBackward, so their views are in flight from then on.
#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "commhost/errors.h"
#include "commhost/mutex.h"
#include "commhost/process_group.h"
#include "commhost/reducer.h"
#include "verify_params.h"

namespace commhost {

using Clock = std::chrono::steady_clock;
using reducer::describeParam;

namespace {

struct Bucket {
  std::vector<size_t> params;    // parameter indices, in slot order
  std::vector<int64_t> offsets;  // element offset of each slot in buffer
  Tensor buffer;                 // flat, of its parameters' dtype
  std::vector<Tensor> views;     // into buffer, shaped like each parameter
  // The iteration in progress (under Impl::mu_ while markReady may run).
  size_t pending = 0;  // slots not filled yet
  GradBucket grad;     // what the hook got: it may hold a reference until its Future completes
  FuturePtr future;    // the hook's Future with the completion-time continuation
  Clock::time_point launchedAt;
  Clock::time_point doneAt;  // written by the continuation, read after waiting on `future`
};

struct SlotRef {
  size_t bucket = 0;
  size_t slot = 0;
};

enum Mark : uint8_t { kUnmarked, kMarked, kPrefilled };  // kPrefilled: static graph's known-unused

void copyBytes(const Tensor& dst, const Tensor& src) {
  if (dst.data() != src.data() && dst.nbytes() > 0) std::memcpy(dst.data(), src.data(), dst.nbytes());
}

std::string describeTensor(const Shape& shape, DType dtype, Device device) {
  return std::string(dtypeName(dtype)) + shape.str() + " on " + device.str();
}

std::string indexList(const std::vector<size_t>& indices, const std::vector<ParamInfo>& params) {
  constexpr size_t kShown = 16;
  std::string out;
  for (size_t k = 0; k < indices.size() && k < kShown; ++k) out += (k ? ", " : "") + describeParam(params, indices[k]);
  if (indices.size() > kShown) out += " and " + std::to_string(indices.size() - kShown) + " more";
  return out;
}

}  // namespace

struct Reducer::Impl {
  Impl(std::shared_ptr<ProcessGroup> g, std::vector<ParamInfo> p, ReducerOptions o)
      : group(std::move(g)), params(std::move(p)), options(std::move(o)) {}

  ErrorContext where(const char* op) const {
    ErrorContext w;
    w.group = group->name();
    w.rank = group->rank();
    w.op = op;
    return w;
  }

  void buildBuckets(const std::vector<std::vector<size_t>>& assignment);
  void prepare();
  void markReady(size_t index, const Tensor& grad);
  void finalize();
  // finalize's steps, in order: the unmarked parameters (their buckets launched, or the
  // iteration refused), every bucket's Future waited for (the first error kept), which
  // parameters some rank used, the results copied to the gradients, the stats.
  std::vector<size_t> launchUnmarked();
  std::exception_ptr waitBuckets();
  void agreeOnUsed(const std::vector<size_t>& unmarked, std::exception_ptr& error);
  int64_t copyResults(const std::vector<Tensor>& targets);
  void recordStats(const std::vector<int64_t>& readyNs, Clock::duration waited, int64_t bytes);
  void rebuild();
  void launchReady() REQUIRES(mu_);
  void zeroSlot(size_t index);
  void waitLaunched() noexcept;

  const std::shared_ptr<ProcessGroup> group;
  const std::vector<ParamInfo> params;
  const ReducerOptions options;
  bool unusedHandling() const { return options.findUnusedParameters || options.staticGraph; }

  // Driving thread (see the file comment).
  std::vector<Bucket> buckets_;
  std::vector<SlotRef> slotOf_;
  std::vector<std::vector<size_t>> assignment_;
  ReducerStats stats_;
  uint64_t iteration_ = 0;  // finished iterations
  bool rebuilt_ = false;
  std::vector<size_t> firstReadyOrder_;  // the first iteration's, rank 0's is broadcast
  bool staticAgreed_ = false;            // staticGraph: the sets below come from the first iteration
  std::vector<size_t> knownUnused_;      // staticGraph: unused here in the first iteration
  std::vector<bool> globallyUsed_;       // used on some rank (the agreed bitmap)
  std::vector<Tensor> saved_;            // gradientAsBucketView: a zeroed view's content, per parameter
  Clock::time_point start_;              // prepareForBackward, before any markReady

  Mutex mu_;
  CondVar launcherIdle_;
  bool active_ GUARDED_BY(mu_) = false;     // between prepareForBackward and finalize
  bool launching_ GUARDED_BY(mu_) = false;  // a thread is in launchReady's loop
  size_t nextLaunch_ GUARDED_BY(mu_) = 0;   // buckets below it were handed to the hook
  std::vector<uint8_t> marked_ GUARDED_BY(mu_);
  std::vector<Tensor> targets_ GUARDED_BY(mu_);  // the tensors passed to markReady
  std::vector<int64_t> readyNs_ GUARDED_BY(mu_);
  std::vector<size_t> readyOrder_ GUARDED_BY(mu_);
};

void Reducer::Impl::buildBuckets(const std::vector<std::vector<size_t>>& assignment) {
  assignment_ = assignment;
  buckets_.clear();
  buckets_.resize(assignment.size());
  slotOf_.assign(params.size(), {});
  for (size_t b = 0; b < assignment.size(); ++b) {
    Bucket& bucket = buckets_[b];
    bucket.params = assignment[b];
    int64_t numel = 0;
    for (size_t i : bucket.params) {
      bucket.offsets.push_back(numel);
      numel += params[i].shape.numel();
    }
    const DType dtype = params[bucket.params.front()].dtype;
    bucket.buffer = Tensor::empty({numel}, dtype);
    for (size_t s = 0; s < bucket.params.size(); ++s) {
      const ParamInfo& p = params[bucket.params[s]];
      Tensor flat = bucket.buffer.slice(bucket.offsets[s], p.shape.numel());
      bucket.views.push_back(Tensor::fromBlob(flat.data(), p.shape, dtype, p.device, bucket.buffer.owner()));
      slotOf_[bucket.params[s]] = {b, s};
    }
  }
}

// With mu_ held: hand every complete bucket from nextLaunch_ on to the hook, in order.
// A thread that finds another one launching leaves its bucket to that thread, which
// looks again after each hook call.
void Reducer::Impl::launchReady() {
  if (launching_) return;
  launching_ = true;
  while (nextLaunch_ < buckets_.size() && buckets_[nextLaunch_].pending == 0) {
    const size_t index = nextLaunch_++;
    Bucket& b = buckets_[index];
    b.grad = GradBucket{index, b.buffer, b.views, b.offsets, b.params, nextLaunch_ == buckets_.size(), group.get()};
    b.launchedAt = Clock::now();
    mu_.unlock();
    FuturePtr future;
    try {
      future = options.hook->runHook(b.grad);
      if (!future) {
        auto w = where("Reducer.hook");
        raise(ErrorCode::InvalidArgument, w, "the comm hook returned no Future for bucket " + std::to_string(index),
              "a CommHook's runHook must return the Future of the bucket's communication");
      }
    } catch (...) {
      future = Future::create();
      future->setError(std::current_exception());
    }
    Bucket* bp = &b;
    future = future->then([bp](Future& done) {
      bp->doneAt = Clock::now();
      return done.wait();
    });
    mu_.lock();
    b.future = std::move(future);
  }
  launching_ = false;
  launcherIdle_.signalAll();
}

void Reducer::Impl::zeroSlot(size_t index) {
  const Tensor& view = buckets_[slotOf_[index].bucket].views[slotOf_[index].slot];
  if (options.gradientAsBucketView) {
    // The view is the workload's gradient: keep what it held, to put back if no rank used it.
    saved_[index] = Tensor::empty(view.shape(), view.dtype());
    copyBytes(saved_[index], view);
  }
  if (view.nbytes() > 0) std::memset(view.data(), 0, view.nbytes());
}

void Reducer::Impl::waitLaunched() noexcept {
  for (auto& b : buckets_) {
    if (!b.future) continue;
    try {
      b.future->wait();
    } catch (...) {  // the caller is reporting another error, or the destructor runs
    }
  }
}

void Reducer::Impl::rebuild() {
  const size_t n = params.size();
  Tensor order = Tensor::empty({static_cast<int64_t>(n)}, DType::Int64);
  if (group->rank() == 0) {
    // The parameters that became ready, in that order; then those never marked (unused),
    // in reverse index order, as the default assignment would visit them.
    std::vector<bool> listed(n, false);
    size_t k = 0;
    for (size_t i : firstReadyOrder_) {
      order.data_as<int64_t>()[k++] = static_cast<int64_t>(i);
      listed[i] = true;
    }
    for (size_t i = n; i-- > 0;)
      if (!listed[i]) order.data_as<int64_t>()[k++] = static_cast<int64_t>(i);
  }
  if (group->size() > 1) group->broadcast(order, {0})->wait();
  std::vector<size_t> visit(n);
  for (size_t k = 0; k < n; ++k) {
    const int64_t i = order.data_as<int64_t>()[k];
    if (i < 0 || static_cast<size_t>(i) >= n) {
      auto w = where("Reducer.rebuild");
      raise(ErrorCode::InvalidArgument, w,
            "rank 0's ready order names parameter " + std::to_string(i) + " but this rank has " + std::to_string(n),
            "every rank must construct its Reducer with the same parameters");
    }
    visit[k] = static_cast<size_t>(i);
  }
  buildBuckets(computeBucketAssignmentBySize(params, {options.firstBucketCapBytes, options.bucketCapBytes}, visit));
  rebuilt_ = true;
}

void Reducer::Impl::prepare() {
  {
    MutexLock lock(&mu_);
    if (active_) {
      auto w = where("Reducer.prepareForBackward");
      raise(ErrorCode::InvalidArgument, w,
            "prepareForBackward() called while iteration " + std::to_string(iteration_ + 1) + " is unfinished",
            "call finalize() after each backward pass, before the next prepareForBackward()");
    }
  }
  if (iteration_ == 1 && options.rebuildBuckets && !rebuilt_) rebuild();
  MutexLock lock(&mu_);
  marked_.assign(params.size(), kUnmarked);
  targets_.assign(params.size(), Tensor());
  readyNs_.assign(params.size(), -1);
  readyOrder_.clear();
  saved_.assign(params.size(), Tensor());
  for (auto& b : buckets_) {
    b.pending = b.params.size();
    b.future.reset();
    b.grad = GradBucket{};
    b.doneAt = b.launchedAt = Clock::time_point{};
  }
  nextLaunch_ = 0;
  start_ = Clock::now();
  active_ = true;
  group->beginForeignIssue();  // ended where active_ goes false, or by ~Reducer
  if (options.staticGraph && staticAgreed_) {
    // Their buckets need not wait for them: zero now, and launch what is complete.
    for (size_t i : knownUnused_) {
      zeroSlot(i);
      marked_[i] = kPrefilled;
      --buckets_[slotOf_[i].bucket].pending;
    }
    launchReady();
  }
}

void Reducer::Impl::markReady(size_t index, const Tensor& grad) {
  if (index >= params.size()) {
    auto w = where("Reducer.markReady");
    raise(ErrorCode::InvalidArgument, w,
          "parameter index " + std::to_string(index) + " is out of range: the Reducer has " +
              std::to_string(params.size()) + " parameters",
          "pass the index of the parameter in the list the Reducer was constructed with");
  }
  const ParamInfo& p = params[index];
  if (grad.shape() != p.shape || grad.dtype() != p.dtype || grad.device() != p.device || !grad.defined()) {
    auto w = where("Reducer.markReady");
    raise(ErrorCode::InvalidArgument, w,
          describeParam(params, index) + ": the gradient is " +
              describeTensor(grad.shape(), grad.dtype(), grad.device()) + " but the parameter is " +
              describeTensor(p.shape, p.dtype, p.device),
          "pass a gradient of the parameter's shape, dtype and device");
  }
  const SlotRef ref = slotOf_[index];
  Bucket& bucket = buckets_[ref.bucket];
  {
    MutexLock lock(&mu_);
    if (!active_) {
      auto w = where("Reducer.markReady");
      raise(ErrorCode::InvalidArgument, w, describeParam(params, index) + " marked ready outside an iteration",
            "call prepareForBackward() before the backward pass, and finalize() after its last markReady");
    }
    if (marked_[index] != kUnmarked) {
      auto w = where("Reducer.markReady");
      if (marked_[index] == kPrefilled)
        raise(ErrorCode::InvalidArgument, w,
              describeParam(params, index) + " marked ready in iteration " + std::to_string(iteration_ + 1) +
                  ", but it was unused in the first iteration and staticGraph is set",
              "with staticGraph the set of used parameters must be the same every iteration; unset staticGraph and "
              "use findUnusedParameters when it changes");
      raise(ErrorCode::InvalidArgument, w,
            describeParam(params, index) + " marked ready twice in iteration " + std::to_string(iteration_ + 1),
            "call markReady once per parameter between prepareForBackward() and finalize()");
    }
    marked_[index] = kMarked;
    targets_[index] = grad;
    readyNs_[index] = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start_).count();
    if (iteration_ == 0) readyOrder_.push_back(index);
  }
  // This thread alone claimed the slot; no lock while copying.
  copyBytes(bucket.views[ref.slot], grad);
  MutexLock lock(&mu_);
  --bucket.pending;
  launchReady();
}

void Reducer::Impl::finalize() {
  const std::vector<size_t> unmarked = launchUnmarked();
  const auto waitStart = Clock::now();
  std::exception_ptr error = waitBuckets();
  const auto waited = Clock::now() - waitStart;
  if (unusedHandling() && !(options.staticGraph && staticAgreed_)) agreeOnUsed(unmarked, error);
  {
    MutexLock lock(&mu_);
    active_ = false;
    group->endForeignIssue();
  }
  if (error) std::rethrow_exception(error);

  std::vector<Tensor> targets;
  std::vector<int64_t> readyNs;
  {
    MutexLock lock(&mu_);
    targets = targets_;
    readyNs = readyNs_;
    if (iteration_ == 0) firstReadyOrder_ = readyOrder_;
  }
  const int64_t bytes = copyResults(targets);
  recordStats(readyNs, waited, bytes);
}

std::vector<size_t> Reducer::Impl::launchUnmarked() {
  std::vector<size_t> unmarked;
  size_t launched = 0;
  {
    MutexLock lock(&mu_);
    if (!active_) {
      auto w = where("Reducer.finalize");
      raise(ErrorCode::InvalidArgument, w, "finalize() called without prepareForBackward()",
            "call prepareForBackward() before each backward pass");
    }
    while (launching_) launcherIdle_.wait(&mu_);
    for (size_t i = 0; i < params.size(); ++i)
      if (marked_[i] == kUnmarked) unmarked.push_back(i);
    if (!unmarked.empty() && !unusedHandling()) {
      active_ = false;  // the iteration is abandoned
      group->endForeignIssue();
      launched = nextLaunch_;
    } else {
      // Unused here: they count as zero, and their buckets go now.
      for (size_t i : unmarked) {
        zeroSlot(i);
        --buckets_[slotOf_[i].bucket].pending;
      }
      launchReady();
    }
  }
  if (!unmarked.empty() && !unusedHandling()) {
    waitLaunched();  // what was launched must finish before the buffers are reused
    auto w = where("Reducer.finalize");
    raise(ErrorCode::InvalidArgument, w,
          "iteration " + std::to_string(iteration_ + 1) + ": " + std::to_string(launched) + " of " +
              std::to_string(buckets_.size()) + " buckets were launched; " + std::to_string(unmarked.size()) +
              " parameters were never marked ready: " + indexList(unmarked, params),
          "set ReducerOptions::findUnusedParameters when some parameters get no gradient in an iteration, or "
          "call markReady for every parameter before finalize()");
  }
  return unmarked;
}

std::exception_ptr Reducer::Impl::waitBuckets() {
  std::exception_ptr error;
  for (auto& b : buckets_) {
    if (!b.future) continue;  // not launched: only when a hook failed first
    try {
      b.future->wait();
    } catch (...) {
      if (!error) error = std::current_exception();
    }
  }
  return error;
}

// Issued only after every bucket's Future completed: a hook may issue its collectives
// from its own thread (powersgd's worker), and the group takes one issuing thread at a
// time, in the same op order on every rank.
void Reducer::Impl::agreeOnUsed(const std::vector<size_t>& unmarked, std::exception_ptr& error) {
  Tensor used = Tensor::empty({static_cast<int64_t>(params.size())}, DType::Int32);
  {
    MutexLock lock(&mu_);
    for (size_t i = 0; i < params.size(); ++i) used.data_as<int32_t>()[i] = marked_[i] == kMarked ? 1 : 0;
  }
  try {
    if (group->size() > 1 && !params.empty()) group->allreduce(used, {ReduceOp::Max})->wait();
    globallyUsed_.assign(params.size(), false);
    for (size_t i = 0; i < params.size(); ++i) globallyUsed_[i] = used.data_as<int32_t>()[i] != 0;
    if (options.staticGraph) {
      knownUnused_ = unmarked;
      staticAgreed_ = true;
    }
  } catch (...) {
    if (!error) error = std::current_exception();
  }
}

// Each bucket ends holding its reduced gradients (so bucketView(i) reads them), copied on
// to the parameters' gradients; returns the bytes reduced.
int64_t Reducer::Impl::copyResults(const std::vector<Tensor>& targets) {
  int64_t bytes = 0;
  for (size_t bi = 0; bi < buckets_.size(); ++bi) {
    Bucket& b = buckets_[bi];
    const auto& value = b.future->wait();
    if (value.empty() || value[0].numel() != b.buffer.numel() || value[0].dtype() != b.buffer.dtype()) {
      auto w = where("Reducer.finalize");
      raise(ErrorCode::InvalidArgument, w,
            "the comm hook's result for bucket " + std::to_string(bi) + " is " +
                (value.empty() ? std::string("empty") : value[0].str()) + ", not like the bucket (" + b.buffer.str() +
                ")",
            "a CommHook's Future must complete with one tensor of the bucket buffer's dtype and size");
    }
    copyBytes(b.buffer, value[0]);
    bytes += static_cast<int64_t>(b.buffer.nbytes());
    for (size_t s = 0; s < b.params.size(); ++s) {
      const size_t i = b.params[s];
      const bool used = !unusedHandling() || globallyUsed_[i];
      if (!used) {
        // No rank used it: the gradient is left as it was.
        if (saved_[i].defined() && saved_[i].data()) copyBytes(b.views[s], saved_[i]);
        continue;
      }
      // Nothing to copy when the gradient is the bucket view (gradientAsBucketView).
      if (targets[i].data()) copyBytes(targets[i], b.views[s]);
    }
  }
  return bytes;
}

void Reducer::Impl::recordStats(const std::vector<int64_t>& readyNs, Clock::duration waited, int64_t bytes) {
  ++iteration_;
  stats_.iteration = iteration_;
  stats_.rebuilt = rebuilt_;
  stats_.buckets = assignment_;
  stats_.ready.assign(params.size(), std::chrono::nanoseconds(-1));
  stats_.backward = std::chrono::nanoseconds(0);
  for (size_t i = 0; i < params.size(); ++i) {
    stats_.ready[i] = std::chrono::nanoseconds(readyNs[i]);
    stats_.backward = std::max(stats_.backward, stats_.ready[i]);
  }
  stats_.launch.clear();
  stats_.comm.clear();
  for (const auto& b : buckets_) {
    stats_.launch.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(b.launchedAt - start_));
    stats_.comm.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(b.doneAt - b.launchedAt));
  }
  stats_.finalizeWait = std::chrono::duration_cast<std::chrono::nanoseconds>(waited);
  stats_.bytes = bytes;
}

Reducer::Reducer(std::shared_ptr<ProcessGroup> group, std::vector<ParamInfo> params, ReducerOptions options) {
  if (!group)
    raise(ErrorCode::InvalidArgument, {}, "Reducer constructed without a group",
          "pass the ProcessGroup to reduce gradients over");
  impl_ = std::make_unique<Impl>(std::move(group), std::move(params), std::move(options));
  auto w = impl_->where("Reducer");
  if (!impl_->options.hook)
    raise(ErrorCode::InvalidArgument, w, "ReducerOptions::hook is not set",
          "set it to makeCommHook(group) for the hook the config names (the average allreduce by default)");
  if (impl_->options.bucketCapBytes <= 0 || impl_->options.firstBucketCapBytes <= 0)
    raise(ErrorCode::InvalidArgument, w,
          "bucket caps must be positive (bucketCapBytes " + std::to_string(impl_->options.bucketCapBytes) +
              ", firstBucketCapBytes " + std::to_string(impl_->options.firstBucketCapBytes) + ")",
          "use sizes in bytes greater than zero");
  for (size_t i = 0; i < impl_->params.size(); ++i) {
    if (impl_->params[i].device.type != DeviceType::CPU)
      raise(ErrorCode::NotSupported, w,
            describeParam(impl_->params, i) + " is on " + impl_->params[i].device.str() +
                ": the Reducer keeps its buckets in host memory and takes CPU gradients only",
            "copy the gradients to the CPU before markReady");
  }
  reducer::verifyParamsAcrossRanks(*impl_->group, impl_->params);
  impl_->buildBuckets(computeBucketAssignmentBySize(
      impl_->params, {impl_->options.firstBucketCapBytes, impl_->options.bucketCapBytes}));
}

Reducer::~Reducer() {
  if (!impl_) return;
  impl_->waitLaunched();
  MutexLock lock(&impl_->mu_);
  if (impl_->active_) impl_->group->endForeignIssue();  // destroyed mid-iteration
}

void Reducer::prepareForBackward() { impl_->prepare(); }
void Reducer::markReady(size_t index, const Tensor& grad) { impl_->markReady(index, grad); }
void Reducer::finalize() { impl_->finalize(); }

Tensor Reducer::bucketView(size_t index) const {
  if (index >= impl_->params.size()) {
    auto w = impl_->where("Reducer.bucketView");
    raise(ErrorCode::InvalidArgument, w,
          "parameter index " + std::to_string(index) + " is out of range: the Reducer has " +
              std::to_string(impl_->params.size()) + " parameters",
          "pass the index of the parameter in the list the Reducer was constructed with");
  }
  const SlotRef ref = impl_->slotOf_[index];
  return impl_->buckets_[ref.bucket].views[ref.slot];
}

const ReducerStats& Reducer::stats() const { return impl_->stats_; }
size_t Reducer::numParams() const { return impl_->params.size(); }

}  // namespace commhost
