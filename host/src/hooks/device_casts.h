// SPDX-License-Identifier: Apache-2.0
// The comm-hook SDK's casts of CUDA tensors (castTo, copyCast on cuda:N). They run the
// cast kernels (commhost/kernels/cast.h) in a module linked to the CUDA runtime,
// libcommhost_cuda_casts.so beside libcommhost, built only with COMMHOST_WITH_CUDA and
// opened the first time a CUDA tensor needs a cast. So neither libcommhost nor the hook
// plugins (fp16_compress, bf16_compress) link CUDA: they load and run on machines
// without it, and only a CUDA tensor, which cannot exist there, needs the module.
#pragma once

#include "commhost/tensor.h"

namespace commhost::hooks {

// Implemented by the module (cuda_casts.cc). Each call runs on the calling thread's
// current stream (commhost::currentStream()) of the tensors' device and returns once the
// cast is done, as the CPU casts do: a hook's callback that copies a result back can
// complete its future right after. Only canCastOnDevice() pairs (f32 <-> f16/bf16).
class DeviceCasts {
 public:
  virtual ~DeviceCasts() = default;
  // A new tensor on src's device, shaped like src, in `dtype`.
  virtual Tensor castTo(const Tensor& src, DType dtype) = 0;
  // dst = src converted (same element count, same device; checked by the caller).
  virtual void copyCast(const Tensor& dst, const Tensor& src) = 0;
};

// The module's casts (opened once, never closed). Throws NotSupportedError naming `what`
// without a CUDA build, BackendError with dlopen's reason when the module or the CUDA
// runtime cannot be loaded.
DeviceCasts& deviceCasts(const std::string& what);

}  // namespace commhost::hooks
