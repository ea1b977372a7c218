// SPDX-License-Identifier: Apache-2.0
// commhost train's model (tools/cli/train/mlp.h): its backward against finite
// differences, the order in which it hands gradients on, the shards of a global batch,
// and the identity data-parallel training rests on (the ranks' scaled shard gradients
// average to the global batch's gradient).
#include "mlp.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace commhost::cli::train {
namespace {

MlpShape smallShape() {
  MlpShape s;
  s.input = 5;
  s.hidden = 7;
  s.layers = 3;
  s.output = 3;
  return s;
}

TEST(TrainMlp, BackwardMatchesFiniteDifferences) {
  const MlpShape shape = smallShape();
  const Teacher teacher(shape, 7);
  Mlp m(shape, 11);
  const Batch b = teacher.batch(0, 0, 6);
  m.forward(b);
  m.backward(b, 1.0f / 6);  // the gradient of forward()'s mean loss
  std::vector<std::vector<float>> analytic;
  for (size_t i = 0; i < m.numParams(); ++i) analytic.emplace_back(m.grad(i), m.grad(i) + m.paramSize(i));
  const float eps = 1e-2f;
  for (size_t i = 0; i < m.numParams(); ++i) {
    for (int64_t e = 0; e < m.paramSize(i); ++e) {
      float& p = m.param(i)[e];
      const float saved = p;
      p = saved + eps;
      const double up = m.loss(b);
      p = saved - eps;
      const double down = m.loss(b);
      p = saved;
      const double numeric = (up - down) / (2.0 * eps);
      EXPECT_NEAR(analytic[i][e], numeric, 2e-3 + 2e-2 * std::fabs(numeric)) << m.paramName(i) << " element " << e;
    }
  }
}

TEST(TrainMlp, BackwardHandsEachGradientOnOnceCompleteFromTheLastLayer) {
  const MlpShape shape = smallShape();
  const Teacher teacher(shape, 3);
  Mlp m(shape, 4);
  const Batch b = teacher.batch(2, 0, 5);
  m.forward(b);
  std::vector<size_t> order;
  std::vector<std::vector<float>> atReady(m.numParams());
  m.backward(b, 0.2f, [&](size_t i) {
    order.push_back(i);
    atReady[i].assign(m.grad(i), m.grad(i) + m.paramSize(i));
  });
  // Reverse parameter order (c10d's bucket order): each layer's bias, then its weight.
  EXPECT_EQ(order, (std::vector<size_t>{5, 4, 3, 2, 1, 0}));
  for (size_t i = 0; i < m.numParams(); ++i)
    EXPECT_EQ(atReady[i], std::vector<float>(m.grad(i), m.grad(i) + m.paramSize(i)))
        << m.paramName(i) << " changed after it was handed on";
}

TEST(TrainMlp, ShardsCoverTheGlobalBatchExactlyOnce) {
  for (int64_t batch = 1; batch <= 40; ++batch) {
    for (int world = 1; world <= 9; ++world) {
      std::vector<int> seen(static_cast<size_t>(batch), 0);
      int64_t expectBegin = 0, smallest = batch, largest = 0;
      for (int rank = 0; rank < world; ++rank) {
        const auto [begin, end] = shardRange(batch, world, rank);
        ASSERT_EQ(begin, expectBegin) << "batch " << batch << " world " << world << " rank " << rank;
        ASSERT_LE(begin, end);
        for (int64_t s = begin; s < end; ++s) ++seen[static_cast<size_t>(s)];
        smallest = std::min(smallest, end - begin);
        largest = std::max(largest, end - begin);
        expectBegin = end;
      }
      EXPECT_EQ(expectBegin, batch);
      for (int64_t s = 0; s < batch; ++s)
        ASSERT_EQ(seen[static_cast<size_t>(s)], 1) << "sample " << s << " of batch " << batch << ", world " << world;
      EXPECT_LE(largest - smallest, 1) << "batch " << batch << " world " << world;
    }
  }
}

TEST(TrainMlp, AShardIsTheSameSamplesAsInTheGlobalBatch) {
  const MlpShape shape = smallShape();
  const Teacher teacher(shape, 5);
  const Batch global = teacher.batch(3, 0, 10);
  const Batch shard = Teacher(shape, 5).batch(3, 4, 7);  // another rank's own Teacher
  EXPECT_EQ(Matrix(global.x.middleCols(4, 3)), shard.x);
  EXPECT_EQ(Matrix(global.y.middleCols(4, 3)), shard.y);
  EXPECT_NE(Matrix(teacher.batch(4, 0, 10).x), global.x) << "each step draws new samples";
}

TEST(TrainMlp, ScaledShardGradientsAverageToTheGlobalGradient) {
  // 10 samples over 3 ranks: shards of 3, 3 and 4, scaled by world/batch each.
  const MlpShape shape = smallShape();
  const Teacher teacher(shape, 9);
  const int64_t batch = 10;
  const int world = 3;
  Mlp global(shape, 1);
  const Batch all = teacher.batch(0, 0, batch);
  global.forward(all);
  global.backward(all, 1.0f / batch);
  std::vector<std::vector<double>> sum;
  for (size_t i = 0; i < global.numParams(); ++i) sum.emplace_back(static_cast<size_t>(global.paramSize(i)), 0.0);
  for (int rank = 0; rank < world; ++rank) {
    Mlp local(shape, 1);
    const auto [begin, end] = shardRange(batch, world, rank);
    const Batch shard = teacher.batch(0, begin, end);
    local.forward(shard);
    local.backward(shard, static_cast<float>(world) / batch);
    for (size_t i = 0; i < local.numParams(); ++i)
      for (int64_t e = 0; e < local.paramSize(i); ++e) sum[i][static_cast<size_t>(e)] += local.grad(i)[e];
  }
  for (size_t i = 0; i < global.numParams(); ++i)
    for (int64_t e = 0; e < global.paramSize(i); ++e)
      EXPECT_NEAR(sum[i][static_cast<size_t>(e)] / world, global.grad(i)[e], 1e-5)
          << global.paramName(i) << " element " << e;
}

TEST(TrainMlp, MaxDeviationNamesTheParameterAndElement) {
  const MlpShape shape = smallShape();
  Mlp a(shape, 2), b(shape, 2);
  EXPECT_EQ(maxDeviation(a, b).max, 0.0);
  b.param(2)[5] += 0.5f;
  b.param(4)[1] += 0.25f;
  const Deviation d = maxDeviation(a, b);
  EXPECT_EQ(d.param, 2u);
  EXPECT_EQ(d.element, 5);
  EXPECT_NEAR(d.max, 0.5, 1e-6);
  b.param(0)[0] = std::nanf("");
  EXPECT_EQ(maxDeviation(a, b).param, 0u) << "a NaN is the largest deviation";
}

}  // namespace
}  // namespace commhost::cli::train
