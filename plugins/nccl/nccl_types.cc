// SPDX-License-Identifier: Apache-2.0
#include "nccl_types.h"

namespace commhost::nccl_backend {

const Capabilities& capabilities() {
  static const Capabilities caps = [] {
    Capabilities c;
    for (OpType op : {OpType::Allreduce, OpType::AllreduceCoalesced, OpType::Broadcast, OpType::Reduce,
                      OpType::Allgather, OpType::AllgatherIntoTensor, OpType::Gather, OpType::Scatter,
                      OpType::ReduceScatter, OpType::ReduceScatterTensor, OpType::Alltoall, OpType::AlltoallSingle,
                      OpType::Barrier, OpType::Send, OpType::Recv, OpType::AllgatherCoalesced})
      c.ops.add(op);
    // NCCL has no receive from any source. Declared so that a config can route every op on
    // cuda to nccl (the loader wants each op on each device served), and left at Backend's
    // default, which fails the call with NotSupportedError, as c10d's ProcessGroupNCCL does.
    c.ops.add(OpType::RecvAnySource);
    for (int d = 0; d < kNumDTypes; ++d)
      if (toNccl(static_cast<DType>(d))) c.dtypes.add(static_cast<DType>(d));
    for (auto k : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Product, ReduceOp::Min, ReduceOp::Max, ReduceOp::PreMulSum})
      c.reduceOps.add(k);
    c.devices.add(DeviceType::CUDA);
    c.features = {Feature::Split, Feature::MultiProcess, Feature::MultiHost};
    return c;
  }();
  return caps;
}

std::optional<ncclDataType_t> toNccl(DType dtype) {
  switch (dtype) {
    case DType::Bool: return ncclUint8;
    case DType::Int8: return ncclInt8;
    case DType::UInt8: return ncclUint8;
    case DType::Int32: return ncclInt32;
    case DType::Int64: return ncclInt64;
    case DType::Float16: return ncclFloat16;
    case DType::BFloat16: return ncclBfloat16;
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
  }
  return std::nullopt;
}

std::optional<ncclRedOp_t> builtinRedOp(ReduceOp::Kind kind, DType dtype) {
  if (dtype == DType::Bool && kind == ReduceOp::Sum) return ncclMax;
  if (dtype == DType::Bool && kind == ReduceOp::Product) return ncclMin;
  switch (kind) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Avg: return ncclAvg;
    case ReduceOp::Product: return ncclProd;
    case ReduceOp::Min: return ncclMin;
    case ReduceOp::Max: return ncclMax;
    default: return std::nullopt;
  }
}

std::string describeNccl(ncclResult_t result, ncclComm_t comm) {
  std::string out = std::string("NCCL error: ") + ncclGetErrorString(result);
  const char* last = ncclGetLastError(comm);
  if (last && *last) out += std::string(" (last error: ") + last + ")";
  return out;
}

std::string hintFor(ncclResult_t result) {
  switch (result) {
    case ncclUnhandledCudaError:
      return "a CUDA call failed: check the device is healthy (nvidia-smi) and no other error came first";
    case ncclSystemError:
      return "a system call failed (sockets, shared memory, files): check the network interfaces and /dev/shm "
             "size; NCCL_DEBUG=INFO says which";
    case ncclInternalError: return "NCCL hit an internal error: rerun with NCCL_DEBUG=INFO and report it";
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return "the ranks may disagree on this op (sizes, dtypes, order): run with debug.check_collectives";
    case ncclRemoteError: return "a peer failed or exited: look at the other ranks' logs first";
    default: return "rerun with NCCL_DEBUG=INFO for NCCL's own account";
  }
}

std::string initHintFor(ncclResult_t result, const std::string& described) {
  if (described.find("Duplicate GPU") != std::string::npos)
    return "NCCL needs one GPU per rank: start at most as many ranks per host as it has GPUs (nvidia-smi -L), or "
           "give each rank its own device (torch.cuda.set_device / CUDA_VISIBLE_DEVICES by LOCAL_RANK)";
  if (result == ncclInvalidUsage || result == ncclInvalidArgument)
    return "the ranks disagree on the communicator (world size, rank numbers) or two share a GPU: NCCL's last error "
           "names which; NCCL_DEBUG=WARN gives more";
  return hintFor(result);
}

}  // namespace commhost::nccl_backend
