// SPDX-License-Identifier: Apache-2.0
// The differences between the torch APIs the bridge builds against, in one place, so the
// ops are written once:
//  - torch 1.13 (Debian 12): a third-party backend is a c10d::ProcessGroup subclass that
//    torch's Python uses as the group itself;
//  - torch 2.x (2.6 on Debian 13): it is a c10d::Backend, registered per device type under
//    a c10d::ProcessGroup that torch makes (device maps, DeviceMesh, coalescing).
// Written against the public c10d headers (Backend.hpp, Work.hpp, Types.hpp), which 2.7+
// keep; nothing here reads torch internals beyond them.
#pragma once

#include <torch/version.h>  // TORCH_VERSION_MAJOR

#include <c10/util/Exception.h>

#include <string>

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif
#include <torch/csrc/distributed/c10d/Types.hpp>

namespace commhost_torch {
namespace compat {

#if TORCH_VERSION_MAJOR >= 2
// The per-device backend torch's own ProcessGroup dispatches to.
using BackendBase = c10d::Backend;
constexpr bool kBackendApi = true;
#else
// 1.13 has no Backend: the process group is the backend.
using BackendBase = c10d::ProcessGroup;
constexpr bool kBackendApi = false;
#endif

// The c10::Error torch turns into a Python RuntimeError, with `message` as its text.
// (1.13 takes the backtrace as a string; 2.x as a lazily formatted value.)
inline c10::Error error(const std::string& message) {
#if TORCH_VERSION_MAJOR >= 2
  return c10::Error(message);
#else
  return c10::Error(message, "");
#endif
}

// Whether a PREMUL_SUM's factor is a tensor (commhost takes a scalar factor only).
inline bool hasTensorFactor(const c10d::NCCLPreMulSumSupplement& s) {
#if TORCH_VERSION_MAJOR >= 2
  return s.tensor_factor.defined();
#else
  return !s.tensor_factors.empty();
#endif
}

}  // namespace compat
}  // namespace commhost_torch
