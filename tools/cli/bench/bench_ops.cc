// SPDX-License-Identifier: Apache-2.0
#include "bench_ops.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <type_traits>

#include "commhost/errors.h"
#include "commhost/kernels/reduce.h"

namespace commhost::cli {
namespace {

// Rank r's element i: small integers, exact in every dtype after a few ranks' sum.
double sourceValue(int rank, int64_t i) { return static_cast<double>((rank + 1) + i % 7); }

double getValue(const Tensor& t, int64_t i) { return kernels::getElement(t.data(), t.dtype(), i); }
void setValue(Tensor& t, int64_t i, double v) { kernels::setElement(t.data(), t.dtype(), i, v); }

double tolerance(DType d) {
  switch (d) {
    case DType::Float16:
    case DType::BFloat16: return 1e-2;
    case DType::Float32: return 1e-5;
    case DType::Float64: return 1e-12;
    default: return 0;
  }
}

// Counts elements of `t` (a host tensor) that differ from `want`.
int64_t countWrongOnHost(const Tensor& t, const std::function<double(int64_t)>& want) {
  int64_t wrong = 0;
  const double tol = tolerance(t.dtype());
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double w = want(i);
    if (std::fabs(getValue(t, i) - w) > tol * std::max(1.0, std::fabs(w))) ++wrong;
  }
  return wrong;
}

class CpuMemory final : public BenchMemory {
 public:
  Device device() const override { return Device::cpu(); }
  Tensor allocate(int64_t count, DType dtype) override { return Tensor::empty({count}, dtype); }
  Tensor toHost(const Tensor& t) override { return t; }
  void fromHost(const Tensor&, Tensor&) override {}  // toHost handed out `to` itself
  void synchronize() override {}
};

class Base : public BenchOp {
 public:
  Base(ProcessGroup& pg, const BenchParams& p, BenchMemory& memory)
      : pg_(pg), p_(p), memory_(memory), n_(pg.size()), rank_(pg.rank()) {}
  int64_t size() const override { return count_ * static_cast<int64_t>(elementSize(p_.dtype)); }
  int64_t count() const override { return count_; }

 protected:
  Tensor make(int64_t count) const { return memory_.allocate(count, p_.dtype); }
  void fillRank(Tensor& t, int rank, int64_t offset = 0) const {
    Tensor host = memory_.toHost(t);
    for (int64_t i = 0; i < host.numel(); ++i) setValue(host, i, sourceValue(rank, offset + i));
    memory_.fromHost(host, t);
  }
  int64_t countWrong(const Tensor& t, const std::function<double(int64_t)>& want) const {
    return countWrongOnHost(memory_.toHost(t), want);
  }
  // The reduction over ranks of element i, as the backend must compute it.
  double reduced(int64_t i) const {
    const bool integral = !isFloating(p_.dtype);
    double acc = sourceValue(0, i);
    int64_t bits = static_cast<int64_t>(acc);
    for (int r = 1; r < n_; ++r) {
      const double v = sourceValue(r, i);
      switch (p_.reduceOp.kind) {
        case ReduceOp::Product: acc *= v; break;
        case ReduceOp::Min: acc = std::min(acc, v); break;
        case ReduceOp::Max: acc = std::max(acc, v); break;
        case ReduceOp::BAnd: bits &= static_cast<int64_t>(v); break;
        case ReduceOp::BOr: bits |= static_cast<int64_t>(v); break;
        case ReduceOp::BXor: bits ^= static_cast<int64_t>(v); break;
        default: acc += v; break;
      }
    }
    if (p_.reduceOp.isBitwise()) acc = static_cast<double>(bits);
    if (p_.reduceOp.kind == ReduceOp::Avg) acc /= n_;
    if (p_.reduceOp.kind == ReduceOp::PreMulSum) acc *= p_.reduceOp.factor;
    if (integral && p_.dtype == DType::Int8) acc = static_cast<int8_t>(static_cast<int64_t>(acc));
    if (integral && p_.dtype == DType::UInt8) acc = static_cast<uint8_t>(static_cast<int64_t>(acc));
    return acc;
  }
  // Whole elements in a message of `bytes` (at least one).
  int64_t elementsFor(int64_t bytes) const {
    return std::max<int64_t>(1, bytes / static_cast<int64_t>(elementSize(p_.dtype)));
  }
  // Elements per rank for ops whose size is the whole (all ranks') buffer.
  int64_t chunkFor(int64_t bytes) const { return std::max<int64_t>(1, elementsFor(bytes) / n_); }
  double spread() const { return n_ > 1 ? static_cast<double>(n_ - 1) / n_ : 0; }

  ProcessGroup& pg_;
  BenchParams p_;
  BenchMemory& memory_;
  int n_, rank_;
  int64_t count_ = 0;
};

class Allreduce final : public Base {
 public:
  using Base::Base;
  void prepare(int64_t bytes) override {
    count_ = elementsFor(bytes);
    t_ = make(count_);
  }
  WorkPtr run() override { return pg_.allreduce(t_, {p_.reduceOp}); }
  void fill() override { fillRank(t_, rank_); }
  int64_t check() override {
    return countWrong(t_, [&](int64_t i) { return reduced(i); });
  }
  double busFactor() const override { return n_ > 1 ? 2.0 * (n_ - 1) / n_ : 0; }
  bool usesReduceOp() const override { return true; }

 private:
  Tensor t_;
};

class Broadcast final : public Base {
 public:
  using Base::Base;
  void prepare(int64_t bytes) override {
    count_ = elementsFor(bytes);
    t_ = make(count_);
  }
  WorkPtr run() override { return pg_.broadcast(t_, {p_.root}); }
  void fill() override { fillRank(t_, rank_); }
  int64_t check() override {
    return countWrong(t_, [&](int64_t i) { return sourceValue(p_.root, i); });
  }
  double busFactor() const override { return 1; }
  bool usesRoot() const override { return true; }

 private:
  Tensor t_;
};

class Reduce final : public Base {
 public:
  using Base::Base;
  void prepare(int64_t bytes) override {
    count_ = elementsFor(bytes);
    t_ = make(count_);
  }
  WorkPtr run() override { return pg_.reduce(t_, {p_.root, p_.reduceOp}); }
  void fill() override { fillRank(t_, rank_); }
  int64_t check() override {
    return rank_ == p_.root ? countWrong(t_, [&](int64_t i) { return reduced(i); }) : 0;
  }
  double busFactor() const override { return 1; }
  bool usesReduceOp() const override { return true; }
  bool usesRoot() const override { return true; }

 private:
  Tensor t_;
};

class Allgather final : public Base {
 public:
  using Base::Base;
  void prepare(int64_t bytes) override {
    chunk_ = chunkFor(bytes);
    count_ = chunk_ * n_;
    out_ = make(count_);
    in_ = p_.inPlace ? out_.slice(rank_ * chunk_, chunk_) : make(chunk_);
  }
  WorkPtr run() override { return pg_.allgatherIntoTensor(out_, in_); }
  void fill() override { fillRank(in_, rank_); }
  int64_t check() override {
    return countWrong(out_, [&](int64_t i) { return sourceValue(static_cast<int>(i / chunk_), i % chunk_); });
  }
  int64_t routedBytes() const override { return chunk_ * static_cast<int64_t>(elementSize(p_.dtype)); }
  double busFactor() const override { return spread(); }

 private:
  int64_t chunk_ = 0;
  Tensor in_, out_;
};

class ReduceScatter final : public Base {
 public:
  using Base::Base;
  void prepare(int64_t bytes) override {
    chunk_ = chunkFor(bytes);
    count_ = chunk_ * n_;
    in_ = make(count_);
    out_ = p_.inPlace ? in_.slice(rank_ * chunk_, chunk_) : make(chunk_);
  }
  WorkPtr run() override { return pg_.reduceScatterTensor(out_, in_, {p_.reduceOp}); }
  void fill() override { fillRank(in_, rank_); }
  int64_t check() override {
    return countWrong(out_, [&](int64_t i) { return reduced(rank_ * chunk_ + i); });
  }
  int64_t routedBytes() const override { return chunk_ * static_cast<int64_t>(elementSize(p_.dtype)); }
  double busFactor() const override { return spread(); }
  bool usesReduceOp() const override { return true; }

 private:
  int64_t chunk_ = 0;
  Tensor in_, out_;
};

class Alltoall final : public Base {
 public:
  using Base::Base;
  void prepare(int64_t bytes) override {
    chunk_ = chunkFor(bytes);
    count_ = chunk_ * n_;
    in_ = make(count_);
    out_ = make(count_);
  }
  WorkPtr run() override { return pg_.alltoallSingle(out_, in_); }
  void fill() override { fillRank(in_, rank_); }
  int64_t check() override {
    // Block s of my output is block `rank_` of rank s's input.
    return countWrong(
        out_, [&](int64_t i) { return sourceValue(static_cast<int>(i / chunk_), rank_ * chunk_ + i % chunk_); });
  }
  double busFactor() const override { return spread(); }
  bool usesReduceOp() const override { return false; }

 private:
  int64_t chunk_ = 0;
  Tensor in_, out_;
};

class Gather final : public Base {
 public:
  using Base::Base;
  void prepare(int64_t bytes) override {
    chunk_ = chunkFor(bytes);
    count_ = chunk_ * n_;
    in_ = make(chunk_);
    outs_.clear();
    if (rank_ == p_.root)
      for (int r = 0; r < n_; ++r) outs_.push_back(make(chunk_));
  }
  WorkPtr run() override { return pg_.gather(outs_, in_, {p_.root}); }
  void fill() override { fillRank(in_, rank_); }
  int64_t check() override {
    int64_t wrong = 0;
    for (size_t r = 0; r < outs_.size(); ++r)
      wrong += countWrong(outs_[r], [&](int64_t i) { return sourceValue(static_cast<int>(r), i); });
    return wrong;
  }
  int64_t routedBytes() const override { return chunk_ * static_cast<int64_t>(elementSize(p_.dtype)); }
  double busFactor() const override { return spread(); }
  bool usesRoot() const override { return true; }

 private:
  int64_t chunk_ = 0;
  Tensor in_;
  std::vector<Tensor> outs_;
};

class Scatter final : public Base {
 public:
  using Base::Base;
  void prepare(int64_t bytes) override {
    chunk_ = chunkFor(bytes);
    count_ = chunk_ * n_;
    out_ = make(chunk_);
    ins_.clear();
    if (rank_ == p_.root)
      for (int r = 0; r < n_; ++r) ins_.push_back(make(chunk_));
  }
  WorkPtr run() override { return pg_.scatter(out_, ins_, {p_.root}); }
  void fill() override {
    for (size_t r = 0; r < ins_.size(); ++r) fillRank(ins_[r], static_cast<int>(r));
  }
  int64_t check() override {
    return countWrong(out_, [&](int64_t i) { return sourceValue(rank_, i); });
  }
  int64_t routedBytes() const override { return chunk_ * static_cast<int64_t>(elementSize(p_.dtype)); }
  double busFactor() const override { return spread(); }
  bool usesRoot() const override { return true; }

 private:
  int64_t chunk_ = 0;
  Tensor out_;
  std::vector<Tensor> ins_;
};

// Each rank sends to the next and receives from the previous (a ring exchange).
class SendRecv final : public Base {
 public:
  using Base::Base;
  void prepare(int64_t bytes) override {
    count_ = elementsFor(bytes);
    in_ = make(count_);
    out_ = make(count_);
  }
  WorkPtr run() override {
    if (n_ == 1) return pg_.barrier();
    auto sent = pg_.send(in_, (rank_ + 1) % n_);
    auto received = pg_.recv(out_, (rank_ + n_ - 1) % n_);
    sent->wait();
    return received;
  }
  void fill() override { fillRank(in_, rank_); }
  int64_t check() override {
    if (n_ == 1) return 0;
    const int from = (rank_ + n_ - 1) % n_;
    return countWrong(out_, [&](int64_t i) { return sourceValue(from, i); });
  }
  // At world 1 nothing is sent (a barrier stands in): no bus bandwidth, as for the other
  // ops there (seen on one GPU: "sendrecv avg bus bandwidth: 279 GB/s" for barriers).
  double busFactor() const override { return n_ > 1 ? 1 : 0; }

 private:
  Tensor in_, out_;
};

class Barrier final : public Base {
 public:
  using Base::Base;
  void prepare(int64_t) override { count_ = 0; }
  WorkPtr run() override { return pg_.barrier(); }
  void fill() override {}
  int64_t check() override { return 0; }
  double busFactor() const override { return 0; }
};

}  // namespace

const std::vector<std::string>& benchOpNames() {
  static const std::vector<std::string> names = {"allreduce", "broadcast", "reduce",  "allgather", "reduce_scatter",
                                                 "alltoall",  "gather",    "scatter", "sendrecv",  "barrier"};
  return names;
}

void requireBenchOp(const std::string& name) {
  const auto& names = benchOpNames();
  if (std::find(names.begin(), names.end(), name) != names.end()) return;
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
  const std::string hint = closestMatch(name, names);
  throw InvalidArgument("unknown bench op '" + name + "'" + (hint.empty() ? "" : " (did you mean '" + hint + "'?)") +
                        "; known: " + list + ", all");
}

std::vector<OpType> benchOpTypes(const std::string& name) {
  if (name == "allgather") return {OpType::AllgatherIntoTensor};
  if (name == "reduce_scatter") return {OpType::ReduceScatterTensor};
  if (name == "alltoall") return {OpType::AlltoallSingle};
  if (name == "sendrecv") return {OpType::Send, OpType::Recv};
  requireBenchOp(name);
  return {parseOpType(name)};  // allreduce, broadcast, reduce, gather, scatter, barrier
}

bool benchOpUsesReduceOp(const std::string& name) {
  return name == "allreduce" || name == "reduce" || name == "reduce_scatter";
}

std::unique_ptr<BenchMemory> cpuMemory() { return std::make_unique<CpuMemory>(); }

std::unique_ptr<BenchOp> makeBenchOp(const std::string& name, ProcessGroup& pg, const BenchParams& p, BenchMemory& m) {
  if (name == "allreduce") return std::make_unique<Allreduce>(pg, p, m);
  if (name == "broadcast") return std::make_unique<Broadcast>(pg, p, m);
  if (name == "reduce") return std::make_unique<Reduce>(pg, p, m);
  if (name == "allgather") return std::make_unique<Allgather>(pg, p, m);
  if (name == "reduce_scatter") return std::make_unique<ReduceScatter>(pg, p, m);
  if (name == "alltoall") return std::make_unique<Alltoall>(pg, p, m);
  if (name == "gather") return std::make_unique<Gather>(pg, p, m);
  if (name == "scatter") return std::make_unique<Scatter>(pg, p, m);
  if (name == "sendrecv") return std::make_unique<SendRecv>(pg, p, m);
  if (name == "barrier") return std::make_unique<Barrier>(pg, p, m);
  requireBenchOp(name);
  return nullptr;
}

}  // namespace commhost::cli
