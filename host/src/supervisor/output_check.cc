// SPDX-License-Identifier: Apache-2.0
#include "output_check.h"

#include "commhost/errors.h"

namespace commhost::supervisor {

OutputSpec OutputSpec::of(const std::vector<Tensor>& outputs) {
  OutputSpec s{static_cast<int>(outputs.size()), 0, outputs.empty() ? DType::Float32 : outputs[0].dtype()};
  for (const auto& t : outputs) s.totalNumel += t.numel();
  return s;
}

std::string outputMismatch(const OutputSpec& spec, const std::vector<Tensor>& value) {
  if (spec.count < 0) return "";
  // The common case first (one tensor, an allreduce's), without the loop.
  if (value.size() == 1 && spec.matchesOne(value[0])) return "";
  int64_t numel = 0;
  bool dtypeOk = true;
  for (const auto& t : value) {
    numel += t.numel();
    dtypeOk = dtypeOk && t.dtype() == spec.dtype;
  }
  if (static_cast<int>(value.size()) == spec.count && numel == spec.totalNumel && dtypeOk) return "";
  std::string got = std::to_string(value.size()) + " tensor(s) of " + std::to_string(numel) + " element(s) in all";
  if (!dtypeOk) {
    got += " (dtypes";
    for (const auto& t : value) got += std::string(" ") + dtypeName(t.dtype());
    got += ")";
  }
  return got + ", but the call's outputs are " + std::to_string(spec.count) + " tensor(s) of " +
         std::to_string(spec.totalNumel) + " element(s) in all (" + dtypeName(spec.dtype) + ")";
}

std::string inlineValueMismatch(const Work& work, const OutputSpec& expect) {
  if (typeid(work) == typeid(TensorWork)) {
    const Tensor* value = static_cast<const TensorWork&>(work).pendingOutput();
    return value ? outputMismatch(expect, {*value}) : "";
  }
  if (typeid(work) != typeid(CompletedWork)) return "";
  const auto* value = static_cast<const CompletedWork&>(work).pendingOutputs();
  return value ? outputMismatch(expect, *value) : "";
}

std::exception_ptr brokenContract(const OpContext& ctx, const std::string& backend, const std::string& mismatch) {
  try {
    raise(ErrorCode::Backend, ErrorContext::of(ctx),
          "backend '" + backend + "' completed it with " + mismatch +
              ": the backend broke the Work contract (a work completes with the op's output tensors, "
              "commhost/work.h)",
          std::string("Fix the backend's ") + opName(ctx.op) + " (tell its author), or route " + opName(ctx.op) +
              " to another backend");
  } catch (...) {
    return std::current_exception();
  }
}

}  // namespace commhost::supervisor
