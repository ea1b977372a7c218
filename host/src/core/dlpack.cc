// SPDX-License-Identifier: Apache-2.0
// DLPack conversion. DLPack 0.6 (Debian 12) has no bool code; bool travels as uint8.
#include <dlpack/dlpack.h>

#include "commhost/errors.h"
#include "commhost/tensor.h"

namespace commhost {
namespace {

DLDataType toDL(DType dtype) {
  const uint8_t bits = static_cast<uint8_t>(elementSize(dtype) * 8);
  switch (dtype) {
    case DType::Bool:
    case DType::UInt8: return {kDLUInt, bits, 1};
    case DType::Int8:
    case DType::Int32:
    case DType::Int64: return {kDLInt, bits, 1};
    case DType::BFloat16: return {kDLBfloat, bits, 1};
    default: return {kDLFloat, bits, 1};
  }
}

DType fromDL(DLDataType t) {
  if (t.lanes != 1)
    throw InvalidArgument("DLPack tensors with " + std::to_string(t.lanes) + " lanes are not supported");
  switch (t.code) {
    case kDLUInt:
      if (t.bits == 8) return DType::UInt8;
      break;
    case kDLInt:
      if (t.bits == 8) return DType::Int8;
      if (t.bits == 32) return DType::Int32;
      if (t.bits == 64) return DType::Int64;
      break;
    case kDLFloat:
      if (t.bits == 16) return DType::Float16;
      if (t.bits == 32) return DType::Float32;
      if (t.bits == 64) return DType::Float64;
      break;
    case kDLBfloat:
      if (t.bits == 16) return DType::BFloat16;
      break;
  }
  throw InvalidArgument("DLPack dtype (code " + std::to_string(t.code) + ", " + std::to_string(t.bits) +
                        " bits) has no commhost equivalent");
}

// Owns what an exported DLManagedTensor points into.
struct ExportContext {
  Tensor tensor;  // keeps the owner alive
  int64_t shape[Shape::kMaxDims];
};

}  // namespace

DLManagedTensor* Tensor::toDLPack() const {
  auto* ctx = new ExportContext{*this, {}};
  for (int i = 0; i < shape_.ndim(); ++i) ctx->shape[i] = shape_[i];
  auto* managed = new DLManagedTensor{};
  managed->dl_tensor.data = data_;
  managed->dl_tensor.device = device_.type == DeviceType::CPU ? DLDevice{kDLCPU, 0} : DLDevice{kDLCUDA, device_.index};
  managed->dl_tensor.ndim = shape_.ndim();
  managed->dl_tensor.dtype = toDL(dtype_);
  managed->dl_tensor.shape = ctx->shape;
  managed->dl_tensor.strides = nullptr;  // compact row-major
  managed->dl_tensor.byte_offset = 0;
  managed->manager_ctx = ctx;
  managed->deleter = [](DLManagedTensor* self) {
    delete static_cast<ExportContext*>(self->manager_ctx);
    delete self;
  };
  return managed;
}

Tensor Tensor::fromDLPack(DLManagedTensor* managed) {
  if (!managed) throw InvalidArgument("fromDLPack got a null DLManagedTensor");
  // Take ownership first so every error path below still calls the producer's deleter.
  std::shared_ptr<void> owner(managed, [](void* p) {
    auto* m = static_cast<DLManagedTensor*>(p);
    if (m->deleter) m->deleter(m);
  });
  const DLTensor& dl = managed->dl_tensor;
  Device device;
  if (dl.device.device_type == kDLCPU || dl.device.device_type == kDLCUDAHost) {
    device = Device::cpu();
  } else if (dl.device.device_type == kDLCUDA) {
    device = Device::cuda(dl.device.device_id);
  } else {
    throw InvalidArgument("DLPack device type " + std::to_string(dl.device.device_type) +
                          " is not supported; commhost takes cpu and cuda tensors");
  }
  Shape shape;
  for (int i = 0; i < dl.ndim; ++i) shape.push(dl.shape[i]);
  if (dl.strides) {
    int64_t expected = 1;
    for (int i = dl.ndim - 1; i >= 0; --i) {
      if (dl.shape[i] != 1 && dl.strides[i] != expected)
        throw InvalidArgument("DLPack tensor " + shape.str() + " is not contiguous (dimension " + std::to_string(i) +
                              " has stride " + std::to_string(dl.strides[i]) + ", expected " +
                              std::to_string(expected) + "); make it contiguous before passing it to commhost");
      expected *= dl.shape[i];
    }
  }
  void* data = static_cast<char*>(dl.data) + dl.byte_offset;
  return fromBlob(data, shape, fromDL(dl.dtype), device, std::move(owner));
}

}  // namespace commhost
