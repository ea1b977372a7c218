// SPDX-License-Identifier: Apache-2.0
// Internal: one ProcessGroup call being validated, routed and issued.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "../supervisor/output_check.h"
#include "commhost/errors.h"
#include "commhost/process_group.h"
#include "group_state.h"
#include "impl.h"
#include "shadow.h"

namespace commhost {

struct ProcessGroup::Impl::Call {
  // Takes the group's current generation once: the whole call routes through it. Only the
  // calling thread (this one) replaces it, so a reference suffices (no refcount per call).
  // With debug.check_collectives it first claims the group for this thread: a second
  // thread issuing while a call is in progress is refused, naming both calls.
  Call(Impl& group, OpType op) : pg(group), st(*group.state_), op(op), ctx(claimContext()) {
    if (pg.checkCollectives_) claimIssuer();
  }
  ~Call();
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  Impl& pg;
  const State& st;
  OpType op;

 private:
  std::optional<OpContext> own_;  // the context of a call made inside another (claimContext)
  bool ownsContext = false;       // ctx is pg.callContext_, given back by the destructor
  // One thread issues on a group at a time, so a load and a store take the group's
  // context (a read-modify-write would be a locked instruction on every op); a nested call
  // finds it taken. Its seq is cleared: where() reads it before issue() gives the call one.
  OpContext& claimContext() {
    if (pg.callContextBusy_.load(std::memory_order_acquire)) return own_.emplace();
    pg.callContextBusy_.store(true, std::memory_order_relaxed);
    ownsContext = true;
    pg.callContext_.seq = 0;
    return pg.callContext_;
  }

 public:
  ErrorContext where(int peer = -1) const;
  [[noreturn]] void invalid(const std::string& what, const std::string& hint) const;
  std::string routeExample(std::optional<DType> dtype, const ReduceOp* reduceOp) const;

  void checkTensor(const Tensor& t, const char* name);
  // `t` must match `ref` in dtype and device (and numel when sameNumel).
  void checkLike(const Tensor& ref, const Tensor& t, const std::string& name, bool sameNumel);
  void checkCount(size_t got, size_t want, const char* what) const;
  void checkRoot(int root);
  void checkPeer(int peer, const char* role) const;
  void checkReduceOp(const ReduceOp& reduceOp, DType dtype);
  // For debug.check_collectives: what of the tensors checked next must agree across
  // ranks: dtype, shape and device type (Full); dtype and device type (alltoall: splits
  // may differ); nothing (lists only the root passes).
  enum class Agree { Full, DtypeOnly, Nothing } agree = Agree::Full;

  // Picks the backend for `bytes` on `device`, checks it can take `dtype` (nullopt for an
  // op that carries no data, such as barrier: no dtype to check), and gives the call its seq. After this no more validation may fail.
  // With debug.check_collectives, first compares this call's fingerprint (op, tensors,
  // root, reduce op, as the checks above saw them) with every rank's.
  Backend& issue(Device device, int64_t bytes, std::optional<DType> dtype, Millis timeout,
                 const ReduceOp* reduceOp = nullptr);
  const OpContext& context() const { return ctx; }
  // Hands the backend's work to the supervisor (when on), which returns the work the
  // caller gets. With the call's outputs, the supervisor also checks that the work's value
  // is them (output_check.h): count, elements and dtype.
  WorkPtr supervise(WorkPtr work, const supervisor::OutputSpec& expect = {});
  // The spec is made only when a supervisor will check it.
  WorkPtr supervise(WorkPtr work, const Tensor& output) {
    return pg.supervisor_ ? supervise(std::move(work), supervisor::OutputSpec::of(output)) : work;
  }
  WorkPtr supervise(WorkPtr work, const std::vector<Tensor>& outputs) {
    return pg.supervisor_ ? supervise(std::move(work), supervisor::OutputSpec::of(outputs)) : work;
  }
  // Shadow mode: when issue() sampled this call for its route's shadow, copies `input`
  // now (before the primary may change it) and returns the op that runs it; else null.
  // `outputLike`: the shape of the shadow's own output (null: the op is in place).
  std::unique_ptr<ShadowOp> shadow(const Tensor& input, const Tensor* outputLike = nullptr) const {
    if (shadowIndex < 0) return nullptr;  // the common case: one predictable branch
    return startShadow(input, outputLike);
  }

 private:
  OpContext& ctx;           // the group's reused one (impl.h), or own_; filled by issue()
  std::string fingerprint;  // filled only with debug.check_collectives
  int backendIndex = -1;
  int shadowIndex = -1;  // the shadow backend this call also runs on, when sampled
  const RouteSpec* shadowRoute = nullptr;
  bool live = false;  // the sample is a live candidate's (tune: live)
  ReduceOp::Kind liveReduceOp = ReduceOp::Sum;
  std::unique_ptr<ShadowOp> startShadow(const Tensor& input, const Tensor* outputLike) const;
  int64_t bytes_ = 0;
  DType dtype_ = DType::Float32;
  std::chrono::steady_clock::time_point issued;
  bool inBackend = false;   // the monitor says this call is inside a backend
  bool ownsIssuer = false;  // this call claimed pg.issuer_ (a nested call on its thread does not)
  void claimIssuer();
};

}  // namespace commhost
