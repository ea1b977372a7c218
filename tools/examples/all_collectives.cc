// SPDX-License-Identifier: Apache-2.0
// all_collectives: joins the job described by the environment (commhost::init), runs
// every collective once on the world group with data each rank can predict, checks
// every result and prints one line per op. Exits 1 on a wrong result, 2 on an error.
//
//   commhost_all_collectives [--elements N]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>

#include "commhost/commhost.h"

namespace {

using namespace commhost;

// Rank r's element i. Small integers, so sums stay exact in float.
float valueAt(int rank, int64_t i) { return static_cast<float>((rank + 1) * 10 + i % 7); }

Tensor rankTensor(int rank, int64_t n) {
  Tensor t = Tensor::empty({n}, DType::Float32);
  for (int64_t i = 0; i < n; ++i) t.data_as<float>()[i] = valueAt(rank, i);
  return t;
}

class Runner {
 public:
  Runner(ProcessGroup& pg, int64_t n) : pg_(pg), n_(n) {}

  // Runs `op`, then `check` returns the number of wrong elements.
  void run(const char* name, const std::function<WorkPtr()>& op, const std::function<int64_t()>& check) {
    const auto start = std::chrono::steady_clock::now();
    WorkPtr work = op();
    work->wait();
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    const int64_t wrong = check();
    wrongTotal_ += wrong;
    std::printf("[rank %d] %-22s seq %-3llu %-8s %8.1f us  %s\n", pg_.rank(), name,
                static_cast<unsigned long long>(work->seq()), sizeLabel().c_str(), us,
                wrong ? ("WRONG: " + std::to_string(wrong) + " elements").c_str() : "ok");
    std::fflush(stdout);
  }
  int64_t wrongTotal() const { return wrongTotal_; }

  static int64_t countWrong(const Tensor& t, const std::function<float(int64_t)>& expected, int64_t offset = 0) {
    int64_t wrong = 0;
    for (int64_t i = 0; i < t.numel(); ++i)
      if (std::fabs(t.data_as<float>()[i] - expected(offset + i)) > 1e-3f) ++wrong;
    return wrong;
  }

 private:
  std::string sizeLabel() const { return "f32[" + std::to_string(n_) + "]"; }
  ProcessGroup& pg_;
  int64_t n_;
  int64_t wrongTotal_ = 0;
};

int64_t parseElements(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--elements") == 0) return std::atoll(argv[i + 1]);
  return 1024;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    auto pg = init();
    const int world = pg->size(), rank = pg->rank();
    const int64_t n = parseElements(argc, argv);
    Runner runner(*pg, n);
    auto sumOver = [&](int64_t i) {
      float s = 0;
      for (int r = 0; r < world; ++r) s += valueAt(r, i);
      return s;
    };

    Tensor t = rankTensor(rank, n);
    runner.run(
        "allreduce(sum)", [&] { return pg->allreduce(t); }, [&] { return Runner::countWrong(t, sumOver); });
    Tensor mx = rankTensor(rank, n);
    runner.run(
        "allreduce(max)", [&] { return pg->allreduce(mx, {ReduceOp::Max}); },
        [&] { return Runner::countWrong(mx, [&](int64_t i) { return valueAt(world - 1, i); }); });
    Tensor avg = rankTensor(rank, n);
    runner.run(
        "allreduce(avg)", [&] { return pg->allreduce(avg, {ReduceOp::Avg}); },
        [&] { return Runner::countWrong(avg, [&](int64_t i) { return sumOver(i) / world; }); });
    std::vector<Tensor> many = {rankTensor(rank, n), rankTensor(rank, n / 2 + 1)};
    runner.run(
        "allreduce_coalesced", [&] { return pg->allreduceCoalesced(many); },
        [&] { return Runner::countWrong(many[0], sumOver) + Runner::countWrong(many[1], sumOver); });
    const int root = world - 1;
    Tensor b = rankTensor(rank, n);
    runner.run(
        "broadcast", [&] { return pg->broadcast(b, {root}); },
        [&] { return Runner::countWrong(b, [&](int64_t i) { return valueAt(root, i); }); });
    Tensor red = rankTensor(rank, n);
    runner.run(
        "reduce", [&] { return pg->reduce(red, {root}); },
        [&] { return rank == root ? Runner::countWrong(red, sumOver) : 0; });
    std::vector<Tensor> gathered;
    for (int r = 0; r < world; ++r) gathered.push_back(Tensor::empty({n}, DType::Float32));
    Tensor mine = rankTensor(rank, n);
    runner.run(
        "allgather", [&] { return pg->allgather(gathered, mine); },
        [&] {
          int64_t wrong = 0;
          for (int r = 0; r < world; ++r)
            wrong += Runner::countWrong(gathered[r], [&](int64_t i) { return valueAt(r, i); });
          return wrong;
        });
    Tensor flat = Tensor::empty({n * world}, DType::Float32);
    runner.run(
        "allgather_into_tensor", [&] { return pg->allgatherIntoTensor(flat, mine); },
        [&] { return Runner::countWrong(flat, [&](int64_t i) { return valueAt(static_cast<int>(i / n), i % n); }); });
    std::vector<Tensor> atRoot;
    if (rank == root)
      for (int r = 0; r < world; ++r) atRoot.push_back(Tensor::empty({n}, DType::Float32));
    runner.run(
        "gather", [&] { return pg->gather(atRoot, mine, {root}); },
        [&] {
          int64_t wrong = 0;
          for (size_t r = 0; r < atRoot.size(); ++r)
            wrong += Runner::countWrong(atRoot[r], [&](int64_t i) { return valueAt(static_cast<int>(r), i); });
          return wrong;
        });
    std::vector<Tensor> toScatter;
    if (rank == root)
      for (int r = 0; r < world; ++r) toScatter.push_back(rankTensor(r + 100, n));
    Tensor scattered = Tensor::empty({n}, DType::Float32);
    runner.run(
        "scatter", [&] { return pg->scatter(scattered, toScatter, {root}); },
        [&] { return Runner::countWrong(scattered, [&](int64_t i) { return valueAt(rank + 100, i); }); });
    std::vector<Tensor> perRank;
    for (int r = 0; r < world; ++r) perRank.push_back(Tensor());
    for (int r = 0; r < world; ++r) perRank[r] = rankTensor(rank, n * world).slice(r * n, n);
    Tensor rsOut = Tensor::empty({n}, DType::Float32);
    runner.run(
        "reduce_scatter", [&] { return pg->reduceScatter(rsOut, perRank); },
        [&] { return Runner::countWrong(rsOut, sumOver, rank * n); });
    std::vector<std::vector<Tensor>> coalescedOut(2);
    for (auto& list : coalescedOut)
      for (int r = 0; r < world; ++r) list.push_back(Tensor::empty({n}, DType::Float32));
    const std::vector<Tensor> coalescedIn = {mine, rankTensor(rank + 50, n)};
    runner.run(
        "allgather_coalesced", [&] { return pg->allgatherCoalesced(coalescedOut, coalescedIn); },
        [&] {
          int64_t wrong = 0;
          for (int r = 0; r < world; ++r) {
            wrong += Runner::countWrong(coalescedOut[0][r], [&](int64_t i) { return valueAt(r, i); });
            wrong += Runner::countWrong(coalescedOut[1][r], [&](int64_t i) { return valueAt(r + 50, i); });
          }
          return wrong;
        });
    Tensor big = rankTensor(rank, n * world), part = Tensor::empty({n}, DType::Float32);
    runner.run(
        "reduce_scatter_tensor", [&] { return pg->reduceScatterTensor(part, big); },
        [&] { return Runner::countWrong(part, sumOver, rank * n); });
    std::vector<Tensor> ins, outs;
    for (int r = 0; r < world; ++r) {
      ins.push_back(rankTensor(rank * world + r, n));
      outs.push_back(Tensor::empty({n}, DType::Float32));
    }
    runner.run(
        "alltoall", [&] { return pg->alltoall(outs, ins); },
        [&] {
          int64_t wrong = 0;
          for (int r = 0; r < world; ++r)
            wrong += Runner::countWrong(outs[r], [&](int64_t i) { return valueAt(r * world + rank, i); });
          return wrong;
        });
    Tensor a2aIn = rankTensor(rank, n * world), a2aOut = Tensor::empty({n * world}, DType::Float32);
    runner.run(
        "alltoall_single", [&] { return pg->alltoallSingle(a2aOut, a2aIn); },
        [&] {
          return Runner::countWrong(a2aOut,
                                    [&](int64_t i) { return valueAt(static_cast<int>(i / n), rank * n + i % n); });
        });
    runner.run(
        "barrier", [&] { return pg->barrier(); }, [] { return int64_t{0}; });
    pg->monitoredBarrier();
    std::printf("[rank %d] monitored_barrier      passed\n", rank);
    std::printf("[rank %d] %s: %d ranks, config %s, %lld wrong elements\n", rank,
                runner.wrongTotal() ? "FAILED" : "all collectives correct", world, pg->config().source.c_str(),
                static_cast<long long>(runner.wrongTotal()));
    return runner.wrongTotal() ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "all_collectives: %s\n", e.what());
    return 2;
  }
}
