// SPDX-License-Identifier: Apache-2.0
// The model `commhost train` trains: a small tanh MLP regressing the outputs of a fixed
// random "teacher" MLP, in plain Eigen. Everything random (the student's initial
// weights, the teacher, every sample) is a pure function of the seed and an index, so
// every rank derives the same model and any slice of any step's global batch without
// communication, and a one-process reference sees exactly the same data.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace commhost::cli::train {

// Row-major, so that a weight's memory is the [out, in] tensor the Reducer is told about.
using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vector = Eigen::VectorXf;

struct MlpShape {
  int input = 32;
  int hidden = 256;
  int layers = 4;  // linear layers; the last has no activation
  int output = 8;
};

// A standard normal number that depends only on (seed, stream, index): counter-based
// (splitmix64 and Box-Muller), so it is the same on every rank and platform.
float normalAt(uint64_t seed, uint64_t stream, uint64_t index);

// Samples [begin, end) of step `step`'s global batch: inputs [input, n] (a column per
// sample) and the teacher's targets [output, n].
struct Batch {
  Matrix x, y;
};

class Teacher {
 public:
  Teacher(const MlpShape& shape, uint64_t seed);
  Batch batch(uint64_t step, int64_t begin, int64_t end) const;
  // A held-out batch (its own stream, never a training step's samples).
  Batch evalBatch(int64_t n) const;

 private:
  Batch make(uint64_t stream, int64_t begin, int64_t end) const;
  MlpShape shape_;
  uint64_t seed_;
  Matrix w1_, w2_;
};

class Mlp {
 public:
  Mlp(const MlpShape& shape, uint64_t seed);

  // Parameters in c10d's model.parameters() order: W0, b0, W1, b1, ... (W_l is
  // [out, in]); the Reducer's buckets take them in reverse, as backward produces them.
  size_t numParams() const { return 2 * w_.size(); }
  std::vector<int64_t> paramShape(size_t i) const;
  std::string paramName(size_t i) const;  // "layer 2 weight"
  float* param(size_t i);
  const float* param(size_t i) const;
  float* grad(size_t i);
  int64_t paramSize(size_t i) const;

  // Forward on `b`; keeps the activations for backward. Returns the loss
  // sum_i 0.5 * ||f(x_i) - y_i||^2 / n over the n samples.
  double forward(const Batch& b);
  // Backward from the last forward, layer by layer from the last: the gradients of
  // `scale` * sum_i 0.5 * ||f(x_i) - y_i||^2. As soon as a parameter's gradient is
  // complete, ready(index) is called (bias, then weight, of each layer), so the caller
  // can hand it on while the layers below are still being computed.
  void backward(const Batch& b, float scale, const std::function<void(size_t)>& ready = {});
  void sgd(float lr);                 // param -= lr * grad, for every parameter
  double loss(const Batch& b) const;  // forward without keeping anything

 private:
  std::vector<Matrix> w_, gw_;
  std::vector<Vector> b_, gb_;
  std::vector<Matrix> act_;  // act_[l]: the input of layer l; act_[layers]: the output
};

// The largest |a - b| over every parameter element, and where it is.
struct Deviation {
  double max = 0;
  size_t param = 0;     // parameter index
  int64_t element = 0;  // flat (row-major) element index within it
  double a = 0, b = 0;  // the two values there
};
Deviation maxDeviation(const Mlp& a, const Mlp& b);

// Rank `rank`'s samples of a global batch of `batch` split over `world` ranks: a
// contiguous [begin, end), the sizes differing by at most one.
std::pair<int64_t, int64_t> shardRange(int64_t batch, int world, int rank);

}  // namespace commhost::cli::train
