// SPDX-License-Identifier: Apache-2.0
// allreduce through the intra-node kernels (intra_node: true): the op runs through run()
// like every NCCL op (the NCCL stream after the caller's, the NaN check, the end event,
// the watchdog), only the launch inside is the kernel instead of ncclAllReduce. The work's
// hooks read the kernel's verdict once it ended and set the abort word on abort.
#include "commhost/logging.h"
#include "nccl_backend.h"

namespace commhost::nccl_backend {

WorkPtr NcclBackend::intraAllreduce(const OpContext& op, Tensor& tensor, const AllreduceOptions& opts) {
  // An aborted or closed backend: the NCCL path reports it.
  if (aborted_.load(std::memory_order_acquire) || closed_.load(std::memory_order_acquire)) return nullptr;
  const int device = tensor.device().index;
  std::shared_ptr<IntraComm> intra = deviceState(op, device).intra;
  if (!intra) return nullptr;
  const kernels::IntraAlgo algo = intra->select(tensor.nbytes(), tensor.dtype(), opts.reduceOp.kind);
  if (algo != kernels::IntraAlgo::OneShot && algo != kernels::IntraAlgo::TwoShot) return nullptr;
  intra->checkUsable(op);

  Op d{device, {tensor}, {tensor}, {tensor}};
  // Set by the launch (on this thread, before the work reaches the watchdog), read by verify.
  auto base = std::make_shared<uint64_t>(0);
  d.hooks.verify = [intra, base, op] { intra->verify(op, *base); };
  d.hooks.abort = [intra] { intra->abort(); };
  void* data = tensor.data();
  const auto count = static_cast<size_t>(tensor.numel());
  const DType dtype = tensor.dtype();
  const ReduceOp reduceOp = opts.reduceOp;
  const std::shared_ptr<Logger> logger = ctx_.logger;
  return run(op, std::move(d), [&](ncclComm_t, cudaStream_t stream) {
    const int e = intra->launch(data, count, dtype, reduceOp, algo, op.timeout, stream, base.get());
    if (e == 0) return ncclSuccess;
    // enqueue() reports an NCCL result only; the CUDA reason goes to the log.
    if (logger)
      logger->error(ErrorContext::of(op).format() + "the intra-node allreduce kernel did not launch: " +
                    cudaGetErrorString(static_cast<cudaError_t>(e)));
    return ncclUnhandledCudaError;
  });
}

}  // namespace commhost::nccl_backend
