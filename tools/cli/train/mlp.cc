// SPDX-License-Identifier: Apache-2.0
#include "mlp.h"

#include <cmath>

namespace commhost::cli::train {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Streams of random numbers, so that no two uses of the seed draw the same ones.
constexpr uint64_t kStudent = 1, kTeacher = 2, kEval = 3, kTrain = 16;  // kTrain + step

constexpr int kTeacherHidden = 64;

// A [rows, cols] matrix of N(0, 1/cols) numbers (fan-in scaling keeps activations O(1)).
Matrix randomMatrix(uint64_t seed, uint64_t stream, int rows, int cols, uint64_t first) {
  Matrix m(rows, cols);
  const float scale = 1.0f / std::sqrt(static_cast<float>(cols));
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c)
      m(r, c) = scale * normalAt(seed, stream, first + static_cast<uint64_t>(r) * cols + c);
  return m;
}

}  // namespace

float normalAt(uint64_t seed, uint64_t stream, uint64_t index) {
  const uint64_t a = splitmix64(seed ^ splitmix64(stream * 0x100000001b3ull ^ splitmix64(2 * index)));
  const uint64_t b = splitmix64(a ^ 0x5851f42d4c957f2dull);
  // Two uniforms in (0, 1]: the top 53 bits, never 0 (log(0) is -inf).
  const double u1 = (static_cast<double>(a >> 11) + 1.0) / 9007199254740992.0;
  const double u2 = static_cast<double>(b >> 11) / 9007199254740992.0;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

Teacher::Teacher(const MlpShape& shape, uint64_t seed)
    : shape_(shape),
      seed_(seed),
      w1_(randomMatrix(seed, kTeacher, kTeacherHidden, shape.input, 0)),
      w2_(randomMatrix(seed, kTeacher, shape.output, kTeacherHidden, 1ull << 40)) {
  // A teacher of unit-variance outputs: tanh shrinks them, so scale the last layer up.
  w2_ *= 2.0f;
}

Batch Teacher::make(uint64_t stream, int64_t begin, int64_t end) const {
  Batch b;
  const auto n = static_cast<int>(end - begin);
  b.x.resize(shape_.input, n);
  for (int s = 0; s < n; ++s)
    for (int i = 0; i < shape_.input; ++i)
      b.x(i, s) = normalAt(seed_, stream, static_cast<uint64_t>(begin + s) * shape_.input + i);
  // A sample at a time: a matrix product's rounding depends on how many columns it has,
  // and a sample's target must be bit-identical in a shard and in the global batch.
  b.y.resize(shape_.output, n);
  for (int s = 0; s < n; ++s) b.y.col(s) = w2_ * (w1_ * b.x.col(s)).array().tanh().matrix();
  return b;
}

Batch Teacher::batch(uint64_t step, int64_t begin, int64_t end) const { return make(kTrain + step, begin, end); }

Batch Teacher::evalBatch(int64_t n) const { return make(kEval, 0, n); }

Mlp::Mlp(const MlpShape& shape, uint64_t seed) {
  for (int l = 0; l < shape.layers; ++l) {
    const int in = l == 0 ? shape.input : shape.hidden;
    const int out = l == shape.layers - 1 ? shape.output : shape.hidden;
    w_.push_back(randomMatrix(seed, kStudent, out, in, static_cast<uint64_t>(l) << 40));
    b_.push_back(Vector::Zero(out));
    gw_.push_back(Matrix::Zero(out, in));
    gb_.push_back(Vector::Zero(out));
  }
}

std::vector<int64_t> Mlp::paramShape(size_t i) const {
  const size_t l = i / 2;
  if (i % 2 == 0) return {w_[l].rows(), w_[l].cols()};
  return {b_[l].size()};
}

std::string Mlp::paramName(size_t i) const {
  return "layer " + std::to_string(i / 2) + (i % 2 == 0 ? " weight" : " bias");
}

float* Mlp::param(size_t i) { return i % 2 == 0 ? w_[i / 2].data() : b_[i / 2].data(); }
const float* Mlp::param(size_t i) const { return i % 2 == 0 ? w_[i / 2].data() : b_[i / 2].data(); }
float* Mlp::grad(size_t i) { return i % 2 == 0 ? gw_[i / 2].data() : gb_[i / 2].data(); }
int64_t Mlp::paramSize(size_t i) const { return i % 2 == 0 ? w_[i / 2].size() : b_[i / 2].size(); }

double Mlp::forward(const Batch& b) {
  const size_t layers = w_.size();
  act_.resize(layers + 1);
  act_[0] = b.x;
  for (size_t l = 0; l < layers; ++l) {
    act_[l + 1] = (w_[l] * act_[l]).colwise() + b_[l];
    if (l + 1 < layers) act_[l + 1] = act_[l + 1].array().tanh().matrix();
  }
  const auto n = b.x.cols();
  return n ? 0.5 * static_cast<double>((act_[layers] - b.y).squaredNorm()) / static_cast<double>(n) : 0.0;
}

void Mlp::backward(const Batch& b, float scale, const std::function<void(size_t)>& ready) {
  const size_t layers = w_.size();
  // d(loss)/d(output of layer l), then through its activation when it has one.
  Matrix delta = scale * (act_[layers] - b.y);
  for (size_t l = layers; l-- > 0;) {
    gb_[l] = delta.rowwise().sum();
    if (ready) ready(2 * l + 1);
    gw_[l].noalias() = delta * act_[l].transpose();
    if (ready) ready(2 * l);
    if (l == 0) break;
    // act_[l] = tanh(z): tanh' = 1 - act^2.
    Matrix up = w_[l].transpose() * delta;
    delta = up.array() * (1.0f - act_[l].array().square());
  }
}

void Mlp::sgd(float lr) {
  for (size_t l = 0; l < w_.size(); ++l) {
    w_[l] -= lr * gw_[l];
    b_[l] -= lr * gb_[l];
  }
}

double Mlp::loss(const Batch& b) const {
  Matrix a = b.x;
  for (size_t l = 0; l < w_.size(); ++l) {
    Matrix z = (w_[l] * a).colwise() + b_[l];
    a = l + 1 < w_.size() ? Matrix(z.array().tanh().matrix()) : z;
  }
  const auto n = b.x.cols();
  return n ? 0.5 * static_cast<double>((a - b.y).squaredNorm()) / static_cast<double>(n) : 0.0;
}

Deviation maxDeviation(const Mlp& a, const Mlp& b) {
  Deviation d;
  for (size_t i = 0; i < a.numParams(); ++i)
    for (int64_t e = 0; e < a.paramSize(i); ++e) {
      const double x = a.param(i)[e], y = b.param(i)[e];
      // NaN compares false: catch it explicitly, it is the worst deviation there is.
      const double diff = std::isnan(x) != std::isnan(y) ? HUGE_VAL : std::fabs(x - y);
      if (diff > d.max || (std::isnan(diff) && !std::isnan(d.max))) d = {diff, i, e, x, y};
    }
  return d;
}

std::pair<int64_t, int64_t> shardRange(int64_t batch, int world, int rank) {
  return {batch * rank / world, batch * (rank + 1) / world};
}

}  // namespace commhost::cli::train
