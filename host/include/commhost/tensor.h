// SPDX-License-Identifier: Apache-2.0
// Tensor: a view of contiguous memory with a shape, an element type and a device.
//
// Ownership: a Tensor never frees its data itself. It holds an optional keep-alive
// owner (a shared_ptr) that is released when the last copy of the Tensor goes away;
// Tensor::empty() allocates CPU memory owned that way. Copying a Tensor copies the view,
// not the data. Tensors are not thread-safe; concurrent reads of one view are fine.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>

#include "commhost/export.h"
#include "commhost/types.h"

struct DLManagedTensor;

namespace commhost {

class COMMHOST_API Shape {
 public:
  static constexpr int kMaxDims = 8;
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  template <class It> Shape(It first, It last) {
    for (; first != last; ++first) push(*first);
  }
  int ndim() const { return ndim_; }
  int64_t operator[](int i) const { return dims_[i]; }
  int64_t numel() const;
  const int64_t* data() const { return dims_.data(); }
  void push(int64_t dim);
  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }
  std::string str() const;  // "[2, 3]"

 private:
  std::array<int64_t, kMaxDims> dims_{};
  int ndim_ = 0;
};

class COMMHOST_API Tensor {
 public:
  Tensor() = default;
  // A view of memory owned elsewhere; `owner` (may be null) is kept alive with the view.
  static Tensor fromBlob(void* data, Shape shape, DType dtype, Device device = Device::cpu(),
                         std::shared_ptr<void> owner = nullptr);
  // Zero-filled CPU memory of the given shape, owned by the tensor (64-byte aligned).
  static Tensor empty(Shape shape, DType dtype);

  void* data() const { return data_; }
  template <class T> T* data_as() const { return static_cast<T*>(data_); }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  // Inline (Shape::numel is a call into the library): both are on every op's path, often
  // several times.
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < shape_.ndim(); ++i) n *= shape_[i];
    return n;
  }
  size_t nbytes() const { return static_cast<size_t>(numel()) * elementBytes(dtype_); }
  bool defined() const { return data_ != nullptr || numel() == 0; }
  const std::shared_ptr<void>& owner() const { return owner_; }
  // A 1-D view of `count` elements starting at element `offset`; shares the owner.
  Tensor slice(int64_t offset, int64_t count) const;
  std::string str() const;  // "f32[4, 2] on cpu"

  // DLPack: export gives a new DLManagedTensor whose deleter releases this tensor's
  // owner; import takes ownership of `managed` and calls its deleter when the last
  // Tensor copy goes away. Import refuses non-contiguous strides with InvalidArgument.
  DLManagedTensor* toDLPack() const;
  static Tensor fromDLPack(DLManagedTensor* managed);

 private:
  void* data_ = nullptr;
  Shape shape_;
  DType dtype_ = DType::Float32;
  Device device_;
  std::shared_ptr<void> owner_;
};

}  // namespace commhost
