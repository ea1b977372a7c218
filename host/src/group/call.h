// Internal: one ProcessGroup call being validated, routed and issued.
#pragma once

#include <string>

#include "commhost/errors.h"
#include "commhost/process_group.h"

namespace commhost {

struct ProcessGroup::Call {
  Call(ProcessGroup& group, OpType op) : pg(group), op(op) {}

  ProcessGroup& pg;
  OpType op;

  ErrorContext where(int peer = -1) const;
  [[noreturn]] void invalid(const std::string& what, const std::string& hint) const;

  void checkTensor(const Tensor& t, const char* name) const;
  // `t` must match `ref` in dtype and device (and numel when sameNumel).
  void checkLike(const Tensor& ref, const Tensor& t, const std::string& name, bool sameNumel) const;
  void checkCount(size_t got, size_t want, const char* what) const;
  void checkRoot(int root) const;
  void checkPeer(int peer, const char* role) const;
  void checkReduceOp(const ReduceOp& reduceOp, DType dtype) const;

  // Picks the backend for `bytes` on `device`, checks it can take `dtype`, and gives the
  // call its seq. After this no more validation may fail.
  Backend& issue(Device device, int64_t bytes, DType dtype, Millis timeout, const ReduceOp* reduceOp = nullptr);
  const OpContext& context() const { return ctx; }

 private:
  OpContext ctx;
};

}  // namespace commhost
