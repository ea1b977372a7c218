// SPDX-License-Identifier: Apache-2.0
// The Work contract's value, checked: a work completes with the op's output tensors
// (work.h), so the host compares what a backend hands back with the call's outputs
// before anyone reads it (a comm hook's bucket, torch's work.result()). Cheap by design:
// the count, the elements in all and the dtype, no data.
#pragma once

#include <cstdint>
#include <exception>
#include <string>
#include <typeinfo>
#include <vector>

#include "../core/tensor_work.h"
#include "commhost/options.h"
#include "commhost/tensor.h"
#include "commhost/types.h"
#include "commhost/work.h"

namespace commhost::supervisor {

struct OutputSpec {
  int count = -1;  // -1: not checked (ops whose value differs by rank, such as gather)
  int64_t totalNumel = 0;
  DType dtype = DType::Float32;

  static OutputSpec of(const Tensor& output) { return {1, output.numel(), output.dtype()}; }
  static OutputSpec of(const std::vector<Tensor>& outputs);
  // The common case, an allreduce's: `t` alone is the value this spec wants.
  bool matchesOne(const Tensor& t) const { return count == 1 && t.numel() == totalNumel && t.dtype() == dtype; }
};

// "" when `value` matches `spec`; else what differs, for an error that names the backend.
std::string outputMismatch(const OutputSpec& spec, const std::vector<Tensor>& value);

// For a work that completed inline: the mismatch ("" when none) between `expect` and its
// value, when that value is readable for free (a CompletedWork or TensorWork whose future
// nobody took); "" otherwise. Inline: on every inline op's path, the common case (one
// tensor that matches) costs a few compares.
std::string inlineValueMismatch(const Work& work, const OutputSpec& expect);
[[gnu::always_inline]] inline bool inlineValueMatches(const Work& work, const OutputSpec& expect) {
  if (expect.count < 0) return true;
  if (typeid(work) == typeid(TensorWork)) {
    const Tensor* value = static_cast<const TensorWork&>(work).pendingOutput();
    return !value || expect.matchesOne(*value) || inlineValueMismatch(work, expect).empty();
  }
  if (typeid(work) != typeid(CompletedWork)) return true;
  const auto* value = static_cast<const CompletedWork&>(work).pendingOutputs();
  if (!value) return true;  // the backend took its future itself: left unchecked
  if (value->size() == 1 && expect.matchesOne((*value)[0])) return true;
  return inlineValueMismatch(work, expect).empty();
}

// The BackendError of a work whose value broke the contract (`mismatch` says how).
std::exception_ptr brokenContract(const OpContext& ctx, const std::string& backend, const std::string& mismatch);

}  // namespace commhost::supervisor
