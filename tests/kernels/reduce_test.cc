#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "commhost/kernels/reduce.h"

namespace commhost::kernels {
namespace {

TEST(Half, EveryFloat16RoundTrips) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const Float16 h{static_cast<uint16_t>(bits)};
    const float f = h.toFloat();
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(Float16::fromFloat(f).toFloat()));
      continue;
    }
    ASSERT_EQ(Float16::fromFloat(f).bits, bits) << "bits " << bits << " value " << f;
  }
}

TEST(Half, Float16RoundsToNearestEven) {
  EXPECT_EQ(Float16::fromFloat(1.0f).bits, 0x3c00);
  EXPECT_EQ(Float16::fromFloat(65504.0f).bits, 0x7bff);
  EXPECT_EQ(Float16::fromFloat(65520.0f).bits, 0x7c00);             // rounds up to inf
  EXPECT_EQ(Float16::fromFloat(1.0f + 1.0f / 2048).bits, 0x3c00);   // tie -> even
  EXPECT_EQ(Float16::fromFloat(1.0f + 3.0f / 2048).bits, 0x3c02);   // tie -> even (up)
  EXPECT_EQ(Float16::fromFloat(std::ldexp(1.0f, -24)).bits, 0x0001);  // smallest subnormal
  EXPECT_EQ(Float16::fromFloat(-2.0f).bits, 0xc000);
}

TEST(Half, BFloat16RoundTripsAndRounds) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const BFloat16 b{static_cast<uint16_t>(bits)};
    const float f = b.toFloat();
    if (std::isnan(f)) continue;
    ASSERT_EQ(BFloat16::fromFloat(f).bits, bits);
  }
  EXPECT_EQ(BFloat16::fromFloat(1.0f + 1.0f / 256).bits, 0x3f80);  // tie -> even
  EXPECT_TRUE(std::isnan(BFloat16::fromFloat(std::nanf("")).toFloat()));
}

TEST(Reduce, EveryOpOnIntsAndFloats) {
  std::vector<int32_t> a = {1, 6, -3}, b = {4, 2, 5};
  auto run = [&](ReduceOp::Kind op) {
    std::vector<int32_t> d = a;
    reduceBuffer(d.data(), b.data(), d.size(), DType::Int32, op);
    return d;
  };
  EXPECT_EQ(run(ReduceOp::Sum), (std::vector<int32_t>{5, 8, 2}));
  EXPECT_EQ(run(ReduceOp::Product), (std::vector<int32_t>{4, 12, -15}));
  EXPECT_EQ(run(ReduceOp::Min), (std::vector<int32_t>{1, 2, -3}));
  EXPECT_EQ(run(ReduceOp::Max), (std::vector<int32_t>{4, 6, 5}));
  EXPECT_EQ(run(ReduceOp::BAnd), (std::vector<int32_t>{0, 2, 5 & -3}));
  EXPECT_EQ(run(ReduceOp::BXor), (std::vector<int32_t>{5, 4, 5 ^ -3}));
  std::vector<float> f = {1, 2};
  const std::vector<float> g = {3, 4};
  EXPECT_THROW(reduceBuffer(f.data(), g.data(), 2, DType::Float32, ReduceOp::BOr), InvalidArgument);
  EXPECT_THROW(scaleBuffer(a.data(), 3, DType::Int32, 0.5), InvalidArgument);
}

TEST(Reduce, HalfTypesAccumulateInFloat) {
  std::vector<BFloat16> d = {BFloat16::fromFloat(1.5f)}, s = {BFloat16::fromFloat(2.25f)};
  reduceBuffer(d.data(), s.data(), 1, DType::BFloat16, ReduceOp::Sum);
  EXPECT_FLOAT_EQ(d[0].toFloat(), 3.75f);
  std::vector<Float16> h = {Float16::fromFloat(3.0f)};
  scaleBuffer(h.data(), 1, DType::Float16, 1.0 / 3);
  EXPECT_FLOAT_EQ(h[0].toFloat(), 1.0f);
  EXPECT_DOUBLE_EQ(finalScale(ReduceOp::Avg, 4), 0.25);
  EXPECT_DOUBLE_EQ(finalScale(ReduceOp::preMulSum(3), 4), 3);
}

TEST(Reduce, BoolSumIsOr) {
  std::vector<uint8_t> d = {0, 1, 0}, s = {1, 1, 0};
  reduceBuffer(d.data(), s.data(), 3, DType::Bool, ReduceOp::Sum);
  EXPECT_EQ(d, (std::vector<uint8_t>{1, 1, 0}));
}

}  // namespace
}  // namespace commhost::kernels
