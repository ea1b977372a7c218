// SPDX-License-Identifier: Apache-2.0
// The nccl backend's manifest and its maps from commhost's types to NCCL's, plus the one
// formatter of NCCL failures. Device-independent: unit-tested without a GPU.
#pragma once

#include <nccl.h>

#include <optional>
#include <string>

#include "commhost/sdk/capabilities.h"
#include "commhost/types.h"

namespace commhost::nccl_backend {

// Ops (recv_any_source declared but refused: see the .cc), dtypes, reduce ops (no bitwise ones: NCCL has none), CUDA only, Split,
// MultiProcess, MultiHost.
const Capabilities& capabilities();

// The NCCL type carrying `dtype`, or nullopt when NCCL has none. Bool travels as
// ncclUint8 (one byte, 0 or 1): sum and max of bools then match torch's "any" semantics
// only for max; the manifest still lists bool because c10d's NCCL does the same.
std::optional<ncclDataType_t> toNccl(DType dtype);

// NCCL's built-in op for `kind` on `dtype`; nullopt for PreMulSum (created per call
// with ncclRedOpCreatePreMulSum) and for the bitwise ops the manifest leaves out. Bools
// (0 or 1 in a byte) reduce as c10d does: sum is max (or), product is min (and).
std::optional<ncclRedOp_t> builtinRedOp(ReduceOp::Kind kind, DType dtype = DType::Float32);

// "NCCL error: <ncclGetErrorString> (last error: <ncclGetLastError>)" for `result`;
// `comm` may be null.
std::string describeNccl(ncclResult_t result, ncclComm_t comm);

// What to do next for a failed NCCL call, by result (system, internal, remote, ...).
std::string hintFor(ncclResult_t result);

// What to do next when creating a communicator failed: `described` is describeNccl's text,
// whose last error tells the likely causes apart. Invalid usage at creation is not a
// disagreement on an op (hintFor's reading) but, most often, two ranks of one host on one
// GPU (NCCL: "Duplicate GPU detected"), as when more ranks than GPUs are started.
std::string initHintFor(ncclResult_t result, const std::string& described);

}  // namespace commhost::nccl_backend
