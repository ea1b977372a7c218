// SPDX-License-Identifier: Apache-2.0
#include <dlpack/dlpack.h>

#include "test_util.h"

namespace commhost::test {
namespace {

TEST(Tensor, ShapeAndViews) {
  Tensor t = Tensor::empty({2, 3}, DType::Float64);
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.nbytes(), 48u);
  EXPECT_EQ(t.str(), "f64[2, 3] on cpu");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % 64, 0u);
  Tensor s = t.slice(2, 3);
  EXPECT_EQ(s.data_as<double>(), t.data_as<double>() + 2);
  EXPECT_EQ(s.owner(), t.owner());
  EXPECT_THROW(t.slice(4, 3), InvalidArgument);
  EXPECT_THROW(Shape({1, 2, 3, 4, 5, 6, 7, 8, 9}), InvalidArgument);
  EXPECT_THROW(Shape({-1}), InvalidArgument);
  EXPECT_FALSE(Tensor().defined());
}

TEST(DLPack, RoundTripKeepsDataAliveAndFields) {
  std::weak_ptr<void> watch;
  DLManagedTensor* managed = nullptr;
  {
    Tensor t = Tensor::empty({4, 5}, DType::BFloat16);
    watch = t.owner();
    managed = t.toDLPack();
  }
  EXPECT_FALSE(watch.expired());  // the export keeps the memory alive
  EXPECT_EQ(managed->dl_tensor.ndim, 2);
  EXPECT_EQ(managed->dl_tensor.dtype.code, kDLBfloat);
  EXPECT_EQ(managed->dl_tensor.shape[1], 5);
  Tensor back = Tensor::fromDLPack(managed);
  EXPECT_EQ(back.dtype(), DType::BFloat16);
  EXPECT_EQ(back.shape(), Shape({4, 5}));
  EXPECT_EQ(back.device(), Device::cpu());
  back = Tensor();
  EXPECT_TRUE(watch.expired());  // importing took ownership; dropping it ran the deleter
}

TEST(DLPack, EveryDTypeRoundTrips) {
  for (DType d : {DType::Int8, DType::UInt8, DType::Int32, DType::Int64, DType::Float16, DType::BFloat16,
                  DType::Float32, DType::Float64}) {
    Tensor t = Tensor::empty({3}, d);
    EXPECT_EQ(Tensor::fromDLPack(t.toDLPack()).dtype(), d) << dtypeName(d);
  }
}

// A cuda tensor's device type and index survive both directions (the data is never
// touched, so a fake device address will do); a CUDA-host (pinned) buffer comes in as cpu.
TEST(DLPack, CudaDeviceAndIndexRoundTrip) {
  static int deleted = 0;
  Tensor gpu = Tensor::fromBlob(reinterpret_cast<void*>(0x7000), {2, 3}, DType::Float16, Device::cuda(3),
                                std::shared_ptr<void>(nullptr, [](void*) { ++deleted; }));
  DLManagedTensor* managed = gpu.toDLPack();
  EXPECT_EQ(managed->dl_tensor.device.device_type, kDLCUDA);
  EXPECT_EQ(managed->dl_tensor.device.device_id, 3);
  Tensor back = Tensor::fromDLPack(managed);
  EXPECT_EQ(back.device(), Device::cuda(3));
  EXPECT_EQ(back.data(), reinterpret_cast<void*>(0x7000));
  EXPECT_EQ(back.shape(), Shape({2, 3}));
  gpu = Tensor();
  back = Tensor();
  EXPECT_EQ(deleted, 1);  // the owner is released once, by the last holder

  float host[4] = {};
  int64_t shape[1] = {4};
  auto* pinned = new DLManagedTensor{};
  pinned->dl_tensor = {host, {kDLCUDAHost, 0}, 1, {kDLFloat, 32, 1}, shape, nullptr, 0};
  pinned->deleter = [](DLManagedTensor* self) { delete self; };
  EXPECT_EQ(Tensor::fromDLPack(pinned).device(), Device::cpu());
}

TEST(DLPack, RefusesStridedAndUnknownAndStillFrees) {
  static int deleted = 0;
  float data[6] = {};
  int64_t shape[2] = {2, 3};
  int64_t strides[2] = {1, 2};  // column-major: not contiguous
  auto* m = new DLManagedTensor{};
  m->dl_tensor = {data, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, strides, 0};
  m->deleter = [](DLManagedTensor* self) {
    ++deleted;
    delete self;
  };
  EXPECT_THROW_WITH(Tensor::fromDLPack(m), InvalidArgument, "not contiguous");
  EXPECT_EQ(deleted, 1);
  auto* vec = new DLManagedTensor{};
  vec->dl_tensor = {data, {kDLCPU, 0}, 1, {kDLFloat, 32, 4}, shape, nullptr, 0};
  vec->deleter = [](DLManagedTensor* self) {
    ++deleted;
    delete self;
  };
  EXPECT_THROW_WITH(Tensor::fromDLPack(vec), InvalidArgument, "4 lanes");
  EXPECT_EQ(deleted, 2);
}

TEST(Types, NamesParseBack) {
  for (int i = 0; i < kNumOpTypes; ++i) EXPECT_EQ(parseOpType(opName(static_cast<OpType>(i))), static_cast<OpType>(i));
  for (int i = 0; i < kNumDTypes; ++i) EXPECT_EQ(parseDType(dtypeName(static_cast<DType>(i))), static_cast<DType>(i));
  EXPECT_EQ(parseDevice("cuda:3"), Device::cuda(3));
  EXPECT_THROW_WITH(parseDevice("gpu"), InvalidArgument, "unknown device 'gpu'");
  EXPECT_THROW_WITH(parseReduceOp("summ"), InvalidArgument, "did you mean 'sum'");
}

// One spelling per reduce op, c10d's: every name parses back, and NCCL's "prod" is
// refused naming the canonical "product" (it used to be a silent second spelling).
TEST(Types, ReduceOpsHaveOneSpelling) {
  for (int i = 0; i < ReduceOp::kNumKinds; ++i)
    EXPECT_EQ(parseReduceOp(reduceOpName(static_cast<ReduceOp::Kind>(i))), static_cast<ReduceOp::Kind>(i));
  EXPECT_STREQ(reduceOpName(ReduceOp::Product), "product");
  EXPECT_THROW_WITH(parseReduceOp("prod"), InvalidArgument, "unknown reduce op 'prod' (did you mean 'product'");
}

}  // namespace
}  // namespace commhost::test
