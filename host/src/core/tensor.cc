// SPDX-License-Identifier: Apache-2.0
#include "commhost/tensor.h"

#include <cstdlib>
#include <cstring>

#include "commhost/errors.h"

namespace commhost {

Shape::Shape(std::initializer_list<int64_t> dims) {
  for (int64_t d : dims) push(d);
}

void Shape::push(int64_t dim) {
  if (ndim_ == kMaxDims) throw InvalidArgument("a tensor may have at most " + std::to_string(kMaxDims) + " dimensions");
  if (dim < 0) throw InvalidArgument("tensor dimension " + std::to_string(dim) + " is negative");
  dims_[ndim_++] = dim;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim_; ++i) n *= dims_[i];
  return n;
}

bool Shape::operator==(const Shape& o) const {
  if (ndim_ != o.ndim_) return false;
  for (int i = 0; i < ndim_; ++i)
    if (dims_[i] != o.dims_[i]) return false;
  return true;
}

std::string Shape::str() const {
  std::string out = "[";
  for (int i = 0; i < ndim_; ++i) out += (i ? ", " : "") + std::to_string(dims_[i]);
  return out + "]";
}

Tensor Tensor::fromBlob(void* data, Shape shape, DType dtype, Device device, std::shared_ptr<void> owner) {
  Tensor t;
  t.data_ = data;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.device_ = device;
  t.owner_ = std::move(owner);
  return t;
}

Tensor Tensor::empty(Shape shape, DType dtype) {
  const size_t bytes = static_cast<size_t>(shape.numel()) * elementSize(dtype);
  const size_t rounded = (bytes + 63) / 64 * 64;
  void* data = std::aligned_alloc(64, rounded ? rounded : 64);
  if (!data) throw InvalidArgument("cannot allocate " + std::to_string(bytes) + " bytes for a tensor");
  std::memset(data, 0, rounded);
  return fromBlob(data, shape, dtype, Device::cpu(), std::shared_ptr<void>(data, std::free));
}

Tensor Tensor::slice(int64_t offset, int64_t count) const {
  if (offset < 0 || count < 0 || offset + count > numel())
    throw InvalidArgument("slice [" + std::to_string(offset) + ", " + std::to_string(offset + count) + ") is outside " +
                          str());
  char* base = static_cast<char*>(data_) + offset * static_cast<int64_t>(elementSize(dtype_));
  return fromBlob(base, Shape{count}, dtype_, device_, owner_);
}

std::string Tensor::str() const { return std::string(dtypeName(dtype_)) + shape_.str() + " on " + device_.str(); }

}  // namespace commhost
