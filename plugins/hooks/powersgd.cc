// SPDX-License-Identifier: Apache-2.0
// `powersgd`: c10d's powerSGD_hook (Vogels et al., 2019). Each gradient of a bucket,
// viewed as a matrix M (first dimension x the rest), is sent as a rank-r approximation
// P Q^T: P = M Q is summed over the ranks and orthogonalized, Q = M^T P is summed and
// averaged, and M is replaced by P Q^T, so (n + m) r numbers travel instead of n m.
// Error feedback adds what the approximation lost last time to this iteration's input;
// warm start begins each iteration's power step from the last Q. Gradients that would
// not shrink by min_compression_rate, and every bucket before start_iter, go through the
// plain average allreduce.
//
// Threading: runHook() only queues the bucket; one worker thread per hook runs the
// buckets in the order they were queued, so the hook's three collectives per bucket are
// issued from one thread in the same order on every rank (the group's rule), while the
// Reducer goes on producing gradients. The state is the worker's, under a mutex that
// saveState()/loadState() take too.
#include <Eigen/Dense>

#include <algorithm>
#include <deque>
#include <random>
#include <thread>

#include "commhost/mutex.h"
#include "commhost/process_group.h"
#include "commhost/sdk/hook_sdk.h"
#include "commhost/sdk/plugin.h"
#include "powersgd_state.h"

namespace commhost::powersgd {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixMap = Eigen::Map<RowMatrix>;

struct Options {
  int64_t rank = 1;
  int64_t startIter = 1000;
  double minCompressionRate = 2;
  double epsilon = 0;
  bool errorFeedback = true;
  bool warmStart = true;
  int64_t seed = 0;
};

// One gradient of the bucket as a matrix, and where its P and Q sit.
struct Item {
  int64_t offset = 0, rows = 0, cols = 0, rank = 0;
  int64_t pAt = 0, qAt = 0;  // element offsets into the concatenated Ps and Qs
  bool compress = false;
};

// A bucket's gradients as items: which compress (c10d's _should_compress), and where their
// P and Q sit in the concatenated Ps and Qs; the totals of each, and of the rest (U).
struct Plan {
  std::vector<Item> items;
  int64_t totalP = 0, totalQ = 0, totalU = 0;
};

Plan planBucket(const GradBucket& bucket, const Options& opts) {
  Plan plan;
  for (size_t i = 0; i < bucket.gradients.size(); ++i) {
    const Tensor& g = bucket.gradients[i];
    Item it;
    it.offset = bucket.offsets[i];
    it.rows = g.shape().ndim() > 0 ? g.shape()[0] : 1;
    it.cols = it.rows > 0 ? g.numel() / it.rows : 0;
    it.rank = std::min({it.rows, it.cols, opts.rank});
    const double uncompressed = static_cast<double>(it.rows) * it.cols;
    const double compressed = static_cast<double>(it.rows + it.cols) * it.rank;
    it.compress = it.rank > 0 && compressed * opts.minCompressionRate < uncompressed;
    if (it.compress) {
      it.pAt = plan.totalP;
      it.qAt = plan.totalQ;
      plan.totalP += it.rows * it.rank;
      plan.totalQ += it.cols * it.rank;
    } else {
      plan.totalU += g.numel();
    }
    plan.items.push_back(it);
  }
  return plan;
}

// The bucket's result into `x`: P Q^T for the compressed gradients, the average of the
// summed others (`uSum`, in item order) for the rest.
void writeResult(std::vector<float>& x, const std::vector<Item>& items, std::vector<float>& p, std::vector<float>& q,
                 const std::vector<float>& uSum, float world) {
  size_t at = 0;
  for (const Item& it : items) {
    if (it.compress) {
      MatrixMap(x.data() + it.offset, it.rows, it.cols).noalias() = MatrixMap(p.data() + it.pAt, it.rows, it.rank) *
                                                                    MatrixMap(q.data() + it.qAt, it.cols, it.rank)
                                                                        .transpose();
    } else {
      for (int64_t k = 0; k < it.rows * it.cols; ++k) x[it.offset + k] = uSum[at + k] / world;
      at += static_cast<size_t>(it.rows * it.cols);
    }
  }
}

// c10d's _orthogonalize: the columns of `m` (rows x r, r <= rows) made orthonormal.
// Householder QR when epsilon is 0 (stable, and a zero column needs no guard);
// Gram-Schmidt dividing by norm + epsilon otherwise, as c10d does for its epsilon.
void orthogonalize(MatrixMap m, double epsilon) {
  if (m.cols() == 0) return;
  if (epsilon == 0) {
    Eigen::HouseholderQR<RowMatrix> qr(m);
    m = qr.householderQ() * RowMatrix::Identity(m.rows(), m.cols());
    return;
  }
  const float eps = static_cast<float>(epsilon);
  for (Eigen::Index i = 0; i < m.cols(); ++i) {
    m.col(i) /= m.col(i).norm() + eps;
    for (Eigen::Index j = i + 1; j < m.cols(); ++j) m.col(j) -= m.col(i).dot(m.col(j)) * m.col(i);
  }
}

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::vector<float> toFloats(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  hooks::copyCast(Tensor::fromBlob(out.data(), {t.numel()}, DType::Float32), t);
  return out;
}

Tensor floatsAs(std::vector<float>& v, DType wire) {
  return hooks::castTo(Tensor::fromBlob(v.data(), {static_cast<int64_t>(v.size())}, DType::Float32), wire);
}

class PowerSgdHook final : public CommHook {
 public:
  explicit PowerSgdHook(Options opts) : opts_(opts), worker_([this] { loop(); }) {}

  ~PowerSgdHook() override {
    {
      MutexLock lock(&queueMutex_);
      stop_ = true;
    }
    queueCv_.signalAll();
    worker_.join();
  }

  FuturePtr runHook(GradBucket& bucket) override {
    const ErrorContext where = hooks::hookContext(bucket, "powersgd");
    if (!bucket.group)
      raise(ErrorCode::InvalidArgument, where, "bucket " + std::to_string(bucket.index) + " has no group",
            "the Reducer sets GradBucket::group; a caller that builds buckets by hand must set it");
    const DType dt = bucket.buffer.dtype();
    if (dt != DType::Float32 && dt != DType::Float16 && dt != DType::BFloat16)
      raise(ErrorCode::InvalidArgument, where,
            "bucket " + std::to_string(bucket.index) + " holds " + dtypeName(dt) +
                " gradients; PowerSGD compresses f32, f16 and bf16",
            "use hook allreduce for these parameters' group");
    auto future = Future::create();
    {
      MutexLock lock(&queueMutex_);
      queue_.push_back({bucket, future});
    }
    queueCv_.signal();
    return future;
  }

  bool hasState() const override { return true; }
  std::vector<uint8_t> saveState() const override {
    MutexLock lock(&stateMutex_);
    return encode(state_, opts_.rank);
  }
  void loadState(const std::vector<uint8_t>& bytes) override {
    State s = decode(bytes, opts_.rank);
    MutexLock lock(&stateMutex_);
    state_ = std::move(s);
  }

 private:
  struct Job {
    GradBucket bucket;
    FuturePtr future;
  };

  void loop() {
    for (;;) {
      Job job;
      {
        MutexLock lock(&queueMutex_);
        while (!stop_ && queue_.empty()) queueCv_.wait(&queueMutex_);
        if (queue_.empty()) return;
        if (stop_) {  // the hook is going away: its group may be gone too
          for (auto& j : queue_)
            j.future->setError(std::make_exception_ptr(AbortedError("powersgd: the hook was destroyed with bucket " +
                                                                    std::to_string(j.bucket.index) + " queued")));
          queue_.clear();
          return;
        }
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      // The future is completed outside stateMutex_: its callbacks run on this thread and
      // may call back into the hook (saveState, the next runHook).
      std::exception_ptr error;
      try {
        MutexLock lock(&stateMutex_);
        step(job.bucket);
      } catch (...) {
        error = std::current_exception();
      }
      Tensor out = job.bucket.buffer;
      job.bucket = GradBucket{};  // keep none of the bucket's tensors past completion
      if (error) job.future->setError(error);
      else job.future->setValue({out});
    }
  }

  // A fresh Q of `size` elements from a seed every rank derives alike.
  void drawQ(std::vector<float>& q, int64_t size) REQUIRES(stateMutex_) {
    q.assign(static_cast<size_t>(size), 0.f);
    std::mt19937_64 rng(splitmix(static_cast<uint64_t>(opts_.seed) ^ splitmix(state_.draws++)));
    std::normal_distribution<float> normal;
    for (auto& v : q) v = normal(rng);
  }

  void advance(const GradBucket& bucket) REQUIRES(stateMutex_) {
    if (bucket.isLast) ++state_.iter;
  }

  void step(GradBucket& bucket) REQUIRES(stateMutex_) {
    ProcessGroup& group = *bucket.group;
    if (state_.iter < opts_.startIter) {
      hooks::allreduceAverage(group, bucket.buffer)->wait();
      advance(bucket);
      return;
    }
    const DType wire = bucket.buffer.dtype();
    const float world = static_cast<float>(group.size());
    std::vector<float> x = toFloats(bucket.buffer);
    const size_t n = x.size();
    BucketState& bs = state_.buckets[bucket.index];
    std::vector<float> before;
    if (opts_.errorFeedback) {
      if (bs.error.size() == n)
        for (size_t i = 0; i < n; ++i) x[i] += bs.error[i];
      before = x;
    }

    const Plan plan = planBucket(bucket, opts_);
    const std::vector<Item>& items = plan.items;
    const int64_t totalP = plan.totalP, totalQ = plan.totalQ, totalU = plan.totalU;
    auto matrix = [&](const Item& it) { return MatrixMap(x.data() + it.offset, it.rows, it.cols); };

    // Warm start reuses last iteration's Q; otherwise (or on the first compressed
    // iteration) Q is drawn from a seed every rank derives alike.
    std::vector<float> p(static_cast<size_t>(totalP));
    std::vector<float>& q = bs.q;
    if (!opts_.warmStart || q.size() != static_cast<size_t>(totalQ) || bs.p.size() != p.size()) drawQ(q, totalQ);
    for (const Item& it : items) {
      if (!it.compress) continue;
      MatrixMap qi(q.data() + it.qAt, it.cols, it.rank);
      orthogonalize(qi, opts_.epsilon);
      MatrixMap(p.data() + it.pAt, it.rows, it.rank).noalias() = matrix(it) * qi;
    }

    // The uncompressed gradients and the Ps go out together (both summed).
    std::vector<float> u;
    u.reserve(static_cast<size_t>(totalU));
    for (const Item& it : items)
      if (!it.compress) u.insert(u.end(), x.begin() + it.offset, x.begin() + it.offset + it.rows * it.cols);
    Tensor uWire = floatsAs(u, wire), pWire = floatsAs(p, wire);
    FuturePtr uSent = totalU ? hooks::allreduceSum(group, uWire) : nullptr;
    FuturePtr pSent = totalP ? hooks::allreduceSum(group, pWire) : nullptr;
    if (uSent) uSent->wait();
    if (pSent) pSent->wait();

    if (totalP) {
      p = toFloats(pWire);
      // Summed, not averaged: orthogonalization removes the scale.
      for (const Item& it : items)
        if (it.compress) orthogonalize(MatrixMap(p.data() + it.pAt, it.rows, it.rank), opts_.epsilon);
      for (const Item& it : items)
        if (it.compress)
          MatrixMap(q.data() + it.qAt, it.cols, it.rank).noalias() = matrix(it).transpose() *
                                                                     MatrixMap(p.data() + it.pAt, it.rows, it.rank);
      Tensor qWire = floatsAs(q, wire);
      hooks::allreduceSum(group, qWire)->wait();
      q = toFloats(qWire);
      for (auto& v : q) v /= world;
    }

    writeResult(x, items, p, q, totalU ? toFloats(uWire) : std::vector<float>{}, world);
    bs.p = std::move(p);
    if (opts_.errorFeedback) {
      bs.error.resize(n);
      for (size_t i = 0; i < n; ++i) bs.error[i] = before[i] - x[i];
    }
    hooks::copyCast(bucket.buffer, Tensor::fromBlob(x.data(), {static_cast<int64_t>(n)}, DType::Float32));
    advance(bucket);
  }

  const Options opts_;
  mutable Mutex stateMutex_;
  State state_ GUARDED_BY(stateMutex_);

  Mutex queueMutex_;
  CondVar queueCv_;
  std::deque<Job> queue_ GUARDED_BY(queueMutex_);
  bool stop_ GUARDED_BY(queueMutex_) = false;
  std::thread worker_;  // last: started once everything above exists
};

std::unique_ptr<CommHook> create(const OptionValues& values, const CommHookContext& ctx) {
  Options o;
  o.rank = values.getInt("rank");
  o.startIter = values.getInt("start_iter");
  o.minCompressionRate = values.getDouble("min_compression_rate");
  o.epsilon = values.getDouble("orthogonalization_epsilon");
  o.errorFeedback = values.getBool("error_feedback");
  o.warmStart = values.getBool("warm_start");
  o.seed = values.getInt("seed");
  if (ctx.inner)
    throw PluginError("powersgd cannot wrap another hook; wrap powersgd instead (wrap: fp16 on its entry)");
  // c10d's rule: its state is kept per bucket, and the Reducer rebuilds its buckets after
  // the first iteration, so state from iteration 0 would land on other gradients.
  if ((o.errorFeedback || o.warmStart) && o.startIter < 2)
    throw ConfigError("powersgd: start_iter is " + std::to_string(o.startIter) +
                      "; with error_feedback or warm_start on it must be at least 2 (the Reducer rebuilds its "
                      "buckets after the first iteration). Raise start_iter, or turn both off");
  return std::make_unique<PowerSgdHook>(o);
}

const PluginDescriptor kDescriptor = {
    COMMHOST_DESCRIPTOR_PREFIX,
    PluginKind::CommHook,
    "powersgd",
    "1.0",
    "Comm hook: PowerSGD rank-r gradient compression with error feedback and warm start",
    {
        {"rank", OptionType::Int, "1", "rank r of each gradient's approximation P Q^T", {}, 1, 1024},
        {"start_iter",
         OptionType::Int,
         "1000",
         "iterations of plain average allreduce before compressing",
         {},
         0,
         1e15},
        {"min_compression_rate",
         OptionType::Double,
         "2",
         "compress a gradient only when n*m > (n+m)*r times this; others go through plain allreduce",
         {},
         1,
         1e9},
        {"orthogonalization_epsilon",
         OptionType::Double,
         "0",
         "added to each norm in Gram-Schmidt (0: Householder QR, no division)",
         {},
         0,
         1},
        {"error_feedback", OptionType::Bool, "true", "add last iteration's compression error to the input"},
        {"warm_start", OptionType::Bool, "true", "start each power step from the last Q"},
        {"seed", OptionType::Int, "0", "seed of the random initial Q (the same on every rank)", {}, 0, 2147483647},
    },
    {},
    nullptr,
    nullptr,
    nullptr,
    create,
};

}  // namespace
}  // namespace commhost::powersgd

COMMHOST_PLUGIN(commhost::powersgd::kDescriptor)
