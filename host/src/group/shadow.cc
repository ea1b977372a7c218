// SPDX-License-Identifier: Apache-2.0
#include "shadow.h"

#include <chrono>
#include <cmath>
#include <cstring>

#include "../supervisor/supervisor.h"
#include "commhost/dtype_storage.h"
#include "commhost/mutex.h"
#include "size_class.h"

namespace commhost {
namespace {

using Steady = std::chrono::steady_clock;

double microsSince(Steady::time_point from, Steady::time_point to) {
  return std::chrono::duration<double, std::micro>(to - from).count();
}

double elementAsDouble(const void* base, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::Float32: return static_cast<const float*>(base)[i];
    case DType::Float64: return static_cast<const double*>(base)[i];
    case DType::Float16: return static_cast<const Float16*>(base)[i].toFloat();
    case DType::BFloat16: return static_cast<const BFloat16*>(base)[i].toFloat();
    default: return 0;
  }
}

std::string number(double v) {
  char text[40];
  std::snprintf(text, sizeof text, "%.9g", v);
  return text;
}

// Both halves of one sampled call; the second to arrive compares.
struct Sample {
  ShadowOp::Target target;
  OpContext ctx;
  int64_t bytes = 0;
  Tensor primaryCopy, shadowOutput, shadowInput;
  double backendUs = 0, shadowUs = 0;
  Mutex failureMutex;
  std::string failure GUARDED_BY(failureMutex);  // written by either callback before it arrives
  bool backendFailed GUARDED_BY(failureMutex) = false;
  std::atomic<int> arrived{0};

  void fail(const std::string& why, bool backend = false) {
    MutexLock lock(&failureMutex);
    if (failure.empty()) failure = why;
    backendFailed = backendFailed || backend;
  }
  void arrive() {
    if (arrived.fetch_add(1, std::memory_order_acq_rel) != 1) return;
    std::string detail;
    bool ofBackend = false;
    {
      MutexLock lock(&failureMutex);
      detail = failure;
      ofBackend = backendFailed;
    }
    const bool failed = !detail.empty();
    if (!failed) detail = shadowCompare(primaryCopy, shadowOutput, target.rtol, target.atol);
    target.stats->add(opName(ctx.op), target.backendName, target.shadowName, bytes, backendUs, shadowUs, failed,
                      detail);
    if (target.live) {
      using O = LiveStats::Outcome;
      const O outcome = ofBackend        ? O::BackendFailed
                        : failed         ? O::CandidateFailed
                        : detail.empty() ? O::Agreed
                                         : O::Disagreed;
      target.live->add(target.liveKey, bytes, backendUs, shadowUs, outcome, detail);
    }
    if (target.supervisor) {
      ShadowEvent e;
      e.group = ctx.group;
      e.rank = ctx.rank;
      e.seq = ctx.seq;
      e.op = opName(ctx.op);
      e.bytes = bytes;
      e.backend = target.backendName;
      e.shadow = target.shadowName;
      e.outcome = failed ? "failed" : detail.empty() ? "agree" : "disagree";
      e.backendUs = backendUs;
      e.shadowUs = shadowUs;
      e.detail = detail;
      target.supervisor->recordShadow(std::move(e));
    }
  }
};

std::string errorText(const Future& f) {
  try {
    if (auto e = f.error()) std::rethrow_exception(e);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// The primary's work, gated: complete only once the primary's output was copied.
class ShadowWork final : public Work {
 public:
  ShadowWork(const OpContext& ctx, WorkPtr inner, FuturePtr gate)
      : Work(ctx), inner_(std::move(inner)), gate_(std::move(gate)) {}
  bool isCompleted() override { return gate_->isCompleted(); }
  bool wait(std::chrono::milliseconds timeout) override {
    const bool done = inner_->wait(timeout);
    if (done) gate_->wait();  // the copy runs on the completing thread; at most a memcpy away
    return done;
  }
  std::exception_ptr exception() override { return inner_->exception(); }
  void abort(const std::string& reason) override { inner_->abort(reason); }
  FuturePtr future() override { return gate_; }
  int sourceRank() const override { return inner_->sourceRank(); }

 private:
  WorkPtr inner_;
  FuturePtr gate_;
};

}  // namespace

void ShadowStats::add(const std::string& op, const std::string& backend, const std::string& shadow, int64_t bytes,
                      double backendUs, double shadowUs, bool failed, const std::string& detail) {
  const int64_t cls = powerOfTwoClass(bytes);
  MutexLock lock(&mutex_);
  if (--inFlight_ <= 0) settled_.signalAll();
  ShadowRecord& r = records_[Key{op, backend, shadow, cls}];
  if (r.samples == 0) {
    r.op = op;
    r.backend = backend;
    r.shadow = shadow;
    r.bytes = cls;
  }
  ++r.samples;
  if (failed) {
    ++r.failed;
    if (r.firstFailure.empty()) r.firstFailure = detail;
    return;
  }
  // Running means over the compared calls.
  const double n = static_cast<double>(r.agreed + r.disagreed + 1);
  r.backendUs += (backendUs - r.backendUs) / n;
  r.shadowUs += (shadowUs - r.shadowUs) / n;
  if (detail.empty()) {
    ++r.agreed;
  } else {
    ++r.disagreed;
    if (r.firstDisagreement.empty()) r.firstDisagreement = detail;
  }
}

void ShadowStats::begin() {
  MutexLock lock(&mutex_);
  ++inFlight_;
}

std::vector<ShadowRecord> ShadowStats::report(std::chrono::milliseconds waitInFlight) const {
  MutexLock lock(&mutex_);
  const auto deadline = std::chrono::steady_clock::now() + waitInFlight;
  while (inFlight_ > 0 && std::chrono::steady_clock::now() < deadline) settled_.waitUntil(&mutex_, deadline);
  std::vector<ShadowRecord> out;
  for (const auto& [key, r] : records_) out.push_back(r);
  return out;
}

std::string shadowCompare(const Tensor& a, const Tensor& b, double rtol, double atol) {
  const DType dtype = a.dtype();
  const int64_t n = a.numel();
  if (isFloating(dtype)) {
    for (int64_t i = 0; i < n; ++i) {
      const double x = elementAsDouble(a.data(), dtype, i), y = elementAsDouble(b.data(), dtype, i);
      const bool same = (std::isnan(x) && std::isnan(y)) || x == y || std::fabs(x - y) <= atol + rtol * std::fabs(y);
      if (!same)
        return "element " + std::to_string(i) + " of " + std::to_string(n) + " (" + dtypeName(dtype) +
               "): " + number(x) + " from the backend, " + number(y) + " from the shadow (rtol " + number(rtol) +
               ", atol " + number(atol) + ")";
    }
    return "";
  }
  const size_t size = elementSize(dtype);
  const auto* x = static_cast<const unsigned char*>(a.data());
  const auto* y = static_cast<const unsigned char*>(b.data());
  if (std::memcmp(x, y, a.nbytes()) == 0) return "";
  for (int64_t i = 0; i < n; ++i)
    if (std::memcmp(x + i * size, y + i * size, size) != 0) {
      std::string xs, ys;
      for (size_t k = size; k-- > 0;) {
        char h[4];
        std::snprintf(h, sizeof h, "%02x", x[i * size + k]);
        xs += h;
        std::snprintf(h, sizeof h, "%02x", y[i * size + k]);
        ys += h;
      }
      return "element " + std::to_string(i) + " of " + std::to_string(n) + " (" + dtypeName(dtype) + "): 0x" + xs +
             " from the backend, 0x" + ys + " from the shadow (integers compare exactly)";
    }
  return "";
}

ShadowOp::ShadowOp(Target target, const OpContext& ctx, int64_t bytes, const Tensor& input, const Tensor* outputLike)
    : target_(std::move(target)), ctx_(ctx), bytes_(bytes), inPlace_(outputLike == nullptr), created_(Steady::now()) {
  input_ = Tensor::empty(input.shape(), input.dtype());
  std::memcpy(input_.data(), input.data(), input.nbytes());
  output_ = inPlace_ ? input_ : Tensor::empty(outputLike->shape(), outputLike->dtype());
}

WorkPtr ShadowOp::run(WorkPtr primary, const Tensor& primaryOutput, const IssueFn& issueFn) {
  auto sample = std::make_shared<Sample>();
  sample->target = target_;
  sample->ctx = ctx_;
  sample->bytes = bytes_;
  sample->shadowOutput = output_;
  sample->shadowInput = input_;  // the shadow backend may read it until its work completes
  target_.stats->begin();        // ended by the add() of the second arrival
  // The primary's completion is hooked before the shadow is issued: a shadow that runs on
  // this thread (a blocking backend) must not count in the primary's time.
  const Tensor out = primaryOutput;
  const Steady::time_point primaryIssued = created_;
  FuturePtr gate = primary->future()->then([sample, out, primaryIssued](Future& f) {
    sample->backendUs = microsSince(primaryIssued, Steady::now());
    sample->primaryCopy = Tensor::empty(out.shape(), out.dtype());
    std::memcpy(sample->primaryCopy.data(), out.data(), out.nbytes());
    sample->arrive();
    return f.wait();
  });
  // A failed primary skips the copy above: nothing to compare, the caller sees its error.
  primary->future()->whenDone([sample](Future& f) {
    if (f.error()) {
      sample->fail("the backend failed: " + errorText(f), true);
      sample->arrive();
    }
  });
  // The shadow: issued now, on the same thread as the primary, in seq order on every rank.
  const Steady::time_point shadowIssued = Steady::now();
  try {
    WorkPtr shadowWork = issueFn(*target_.backend, ctx_, output_, input_);
    shadowWork->future()->whenDone([sample, shadowIssued](Future& f) {
      sample->shadowUs = microsSince(shadowIssued, Steady::now());
      if (f.error()) sample->fail("the shadow failed: " + errorText(f));
      sample->arrive();
    });
  } catch (const std::exception& e) {
    sample->fail(std::string("the shadow failed to start: ") + e.what());
    sample->arrive();
  }
  return std::make_shared<ShadowWork>(ctx_, std::move(primary), std::move(gate));
}

}  // namespace commhost
