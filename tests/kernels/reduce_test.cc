// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
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
  EXPECT_EQ(Float16::fromFloat(65520.0f).bits, 0x7c00);               // rounds up to inf
  EXPECT_EQ(Float16::fromFloat(1.0f + 1.0f / 2048).bits, 0x3c00);     // tie -> even
  EXPECT_EQ(Float16::fromFloat(1.0f + 3.0f / 2048).bits, 0x3c02);     // tie -> even (up)
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

// Integer sums and products wrap around as two's complement, as the peers' do, without
// signed overflow (undefined; UBSan stopped bench's 1.5 Gi + 1.5 Gi int32 sum).
TEST(Reduce, IntegerSumsAndProductsWrapAround) {
  std::vector<int32_t> a = {1610612736, INT32_MAX, INT32_MIN}, b = {1610612736, 1, -1};
  std::vector<int32_t> d = a;
  reduceBuffer(d.data(), b.data(), d.size(), DType::Int32, ReduceOp::Sum);
  EXPECT_EQ(d, (std::vector<int32_t>{-1073741824, INT32_MIN, INT32_MAX}));
  d = {65536, INT32_MIN, 3};
  const std::vector<int32_t> m = {65536, -1, -5};
  reduceBuffer(d.data(), m.data(), d.size(), DType::Int32, ReduceOp::Product);
  EXPECT_EQ(d, (std::vector<int32_t>{0, INT32_MIN, -15}));
  std::vector<int64_t> l = {INT64_MAX}, one = {1};
  reduceBuffer(l.data(), one.data(), 1, DType::Int64, ReduceOp::Sum);
  EXPECT_EQ(l[0], INT64_MIN);
  std::vector<uint8_t> u = {200}, v = {200};
  reduceBuffer(u.data(), v.data(), 1, DType::UInt8, ReduceOp::Product);
  EXPECT_EQ(u[0], static_cast<uint8_t>(200 * 200));
  std::vector<int8_t> i8 = {100}, j8 = {100};
  reduceBuffer(i8.data(), j8.data(), 1, DType::Int8, ReduceOp::Sum);
  EXPECT_EQ(i8[0], static_cast<int8_t>(-56));
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

// Avg and PreMulSum of 16-bit floats: a result that fits must not be lost to a 16-bit sum
// that does not (f16 max is 65504; four 30000s sum to 120000 but average to 30000).
TEST(Reduce, HalfAvgScalesBeforeTheStore) {
  for (int count : {2, 3, 4, 5, 7}) {  // the fused paths and the blocked one
    std::vector<std::vector<Float16>> in(count, std::vector<Float16>(1000, Float16::fromFloat(30000.0f)));
    std::vector<const void*> srcs;
    for (auto& v : in) srcs.push_back(v.data());
    std::vector<Float16> out(1000);
    reduceSourcesBuffer(out.data(), srcs.data(), count, out.size(), DType::Float16, ReduceOp::Avg,
                        finalScale(ReduceOp::Avg, count));
    EXPECT_FLOAT_EQ(out.front().toFloat(), 30000.0f) << count << " sources";
    EXPECT_FLOAT_EQ(out.back().toFloat(), 30000.0f) << count << " sources";
    reduceSourcesBuffer(out.data(), srcs.data(), count, out.size(), DType::Float16, ReduceOp::PreMulSum,
                        finalScale(ReduceOp::preMulSum(0.5 / count), count));
    EXPECT_FLOAT_EQ(out.front().toFloat(), 15000.0f) << count << " sources";
  }
  // An integer dtype cannot take a fractional factor: refused, not truncated.
  std::vector<int32_t> a = {1}, b = {2};
  const void* ints[] = {a.data(), b.data()};
  int32_t r = 0;
  EXPECT_THROW(reduceSourcesBuffer(&r, ints, 2, 1, DType::Int32, ReduceOp::Sum, 0.5), InvalidArgument);
}

// A pairwise fold (Gloo's ring) keeps 16-bit partial sums, so 16-bit inputs are scaled
// before the reduction and f32/f64 results after it.
TEST(Reduce, PairwiseScaleSplitsBy16BitDtypes) {
  const ReduceOp avg = ReduceOp::Avg;
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    EXPECT_DOUBLE_EQ(pairwiseScale(avg, 4, dt).input, 0.25) << dtypeName(dt);
    EXPECT_DOUBLE_EQ(pairwiseScale(avg, 4, dt).output, 1.0) << dtypeName(dt);
  }
  for (DType dt : {DType::Float32, DType::Float64}) {
    EXPECT_DOUBLE_EQ(pairwiseScale(avg, 4, dt).input, 1.0) << dtypeName(dt);
    EXPECT_DOUBLE_EQ(pairwiseScale(avg, 4, dt).output, 0.25) << dtypeName(dt);
  }
  EXPECT_DOUBLE_EQ(pairwiseScale(ReduceOp::Sum, 4, DType::Float16).input, 1.0);
  // What the split buys: four ranks' 30000s folded pairwise through an f16 partial sum.
  const ScaleSplit s = pairwiseScale(avg, 4, DType::Float16);
  std::vector<Float16> acc = {Float16::fromFloat(30000.0f)};
  scaleBuffer(acc.data(), 1, DType::Float16, s.input);
  for (int r = 1; r < 4; ++r) {
    std::vector<Float16> peer = {Float16::fromFloat(30000.0f)};
    scaleBuffer(peer.data(), 1, DType::Float16, s.input);
    reduceBuffer(acc.data(), peer.data(), 1, DType::Float16, ReduceOp::Avg);
  }
  scaleBuffer(acc.data(), 1, DType::Float16, s.output);
  EXPECT_FLOAT_EQ(acc[0].toFloat(), 30000.0f);
}

TEST(Reduce, BoolSumIsOr) {
  std::vector<uint8_t> d = {0, 1, 0}, s = {1, 1, 0};
  reduceBuffer(d.data(), s.data(), 3, DType::Bool, ReduceOp::Sum);
  EXPECT_EQ(d, (std::vector<uint8_t>{1, 1, 0}));
}

}  // namespace
}  // namespace commhost::kernels
