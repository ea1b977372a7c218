// SPDX-License-Identifier: Apache-2.0
#include "commhost/sdk/hook_sdk.h"

#include <utility>

#include "commhost/dtype_storage.h"
#include "commhost/errors.h"
#include "commhost/process_group.h"
#include "device_casts.h"

namespace commhost::hooks {

FuturePtr allreduceSum(ProcessGroup& group, Tensor tensor) {
  WorkPtr work = group.allreduce(tensor);
  return work->future()->then([tensor, work](Future&) { return std::vector<Tensor>{tensor}; });
}

FuturePtr allreduceAverage(ProcessGroup& group, Tensor tensor) {
  const int world = group.size();
  const bool half = tensor.dtype() == DType::Float16 || tensor.dtype() == DType::BFloat16;
  if (world == 1) return Future::completed({tensor});
  if (tensor.device().type != DeviceType::CPU) {
    // The host cannot scale device memory: the backend multiplies each rank's input by
    // 1/world before the sum (premul_sum; what c10d's fp16 hook does with div_ first).
    // Integer tensors ask for avg, which the backend serves or refuses.
    AllreduceOptions opts;
    opts.reduceOp = isFloating(tensor.dtype()) ? ReduceOp::preMulSum(1.0 / world) : ReduceOp(ReduceOp::Avg);
    WorkPtr work = group.allreduce(tensor, opts);
    return work->future()->then([tensor, work](Future&) { return std::vector<Tensor>{tensor}; });
  }
  // 16-bit sums are kept in 16 bit by pairwise backends (Gloo): divide first.
  if (half) convertBuffer(tensor.data(), tensor.dtype(), tensor.data(), tensor.dtype(), tensor.numel(), 1.0 / world);
  WorkPtr work = group.allreduce(tensor);
  return work->future()->then([tensor, work, world, half](Future&) {
    if (!half) convertBuffer(tensor.data(), tensor.dtype(), tensor.data(), tensor.dtype(), tensor.numel(), 1.0 / world);
    return std::vector<Tensor>{tensor};
  });
}

ErrorContext hookContext(const GradBucket& bucket, const char* op) {
  ErrorContext where;
  where.op = op;
  if (bucket.group) {
    where.group = bucket.group->name();
    where.rank = bucket.group->rank();
    where.seq = bucket.group->seq();
  }
  return where;
}

namespace {
// On a CUDA tensor: the kernels' pairs (f32 <-> f16/bf16) without a factor, or why not.
void checkDeviceCast(const std::string& what, DType dst, DType src, double factor) {
  if (factor != 1.0 || !canCastOnDevice(dst, src))
    throw NotSupportedError(what +
                            ": CUDA tensors are cast on the device between f32 and f16/bf16 only, without a "
                            "factor; copy the tensor to the CPU for other casts");
}
}  // namespace

Tensor castTo(const Tensor& src, DType dtype, double factor) {
  if (src.device().type == DeviceType::CUDA) {
    const std::string what = "castTo(" + src.str() + ", " + dtypeName(dtype) + ")";
    checkDeviceCast(what, dtype, src.dtype(), factor);
    return deviceCasts(what).castTo(src, dtype);
  }
  Tensor out = Tensor::empty(src.shape(), dtype);
  convertBuffer(out.data(), dtype, src.data(), src.dtype(), src.numel(), factor);
  return out;
}

void copyCast(const Tensor& dst, const Tensor& src) {
  if (dst.numel() != src.numel())
    throw InvalidArgument("copyCast: " + dst.str() + " and " + src.str() +
                          " differ in element count; cast between tensors of one size");
  if (dst.device() != src.device())
    throw InvalidArgument("copyCast: " + dst.str() + " and " + src.str() +
                          " are on different devices; cast between tensors of one device");
  if (src.device().type == DeviceType::CUDA) {
    const std::string what = "copyCast(" + dst.str() + ", " + src.str() + ")";
    checkDeviceCast(what, dst.dtype(), src.dtype(), 1.0);
    deviceCasts(what).copyCast(dst, src);
    return;
  }
  convertBuffer(dst.data(), dst.dtype(), src.data(), src.dtype(), src.numel());
}

GradBucket rebucket(const GradBucket& bucket, Tensor buffer) {
  GradBucket out;
  out.index = bucket.index;
  out.offsets = bucket.offsets;
  out.params = bucket.params;
  out.isLast = bucket.isLast;
  out.group = bucket.group;
  const size_t element = elementSize(buffer.dtype());
  for (size_t i = 0; i < bucket.gradients.size(); ++i) {
    auto* at = static_cast<char*>(buffer.data()) + static_cast<size_t>(bucket.offsets[i]) * element;
    out.gradients.push_back(
        Tensor::fromBlob(at, bucket.gradients[i].shape(), buffer.dtype(), buffer.device(), buffer.owner()));
  }
  out.buffer = std::move(buffer);
  return out;
}

namespace {

class CompressHook final : public CommHook {
 public:
  CompressHook(DType wire, std::shared_ptr<CommHook> inner) : wire_(wire), inner_(std::move(inner)) {}

  FuturePtr runHook(GradBucket& bucket) override {
    if (!bucket.group)
      raise(ErrorCode::InvalidArgument, hookContext(bucket, "comm hook"),
            "bucket " + std::to_string(bucket.index) + " has no group",
            "the Reducer sets GradBucket::group; a caller "
            "that builds buckets by hand must set it to the group to communicate over");
    Tensor original = bucket.buffer;
    // An f16 bucket under the f16 wrapper needs no copy: the cast would be the identity.
    if (original.dtype() == wire_) return inner_ ? inner_->runHook(bucket) : allreduceAverage(*bucket.group, original);
    Tensor compressed = castTo(original, wire_);
    FuturePtr sent;
    if (inner_) {
      GradBucket narrow = rebucket(bucket, compressed);
      sent = inner_->runHook(narrow);
    } else {
      sent = allreduceAverage(*bucket.group, compressed);
    }
    return sent->then([original](Future& f) {
      copyCast(original, f.wait().at(0));
      return std::vector<Tensor>{original};
    });
  }

  bool hasState() const override { return inner_ && inner_->hasState(); }
  std::vector<uint8_t> saveState() const override {
    if (!inner_) return CommHook::saveState();
    return inner_->saveState();
  }
  void loadState(const std::vector<uint8_t>& state) override {
    if (!inner_) return CommHook::loadState(state);
    inner_->loadState(state);
  }

 private:
  DType wire_;
  std::shared_ptr<CommHook> inner_;
};

}  // namespace

std::unique_ptr<CommHook> makeCompressHook(DType wire, std::shared_ptr<CommHook> inner) {
  if (wire != DType::Float16 && wire != DType::BFloat16)
    throw InvalidArgument(std::string("makeCompressHook: compresses to f16 or bf16, not ") + dtypeName(wire));
  return std::make_unique<CompressHook>(wire, std::move(inner));
}

}  // namespace commhost::hooks
