// SPDX-License-Identifier: Apache-2.0
// The shm backend with ranks as threads over a HashStore: every dtype x reduce op for
// allreduce, reduce and reduce_scatter, and every other op it serves, at 1 to 4 ranks,
// through both allreduce algorithms and both paths of the work queue (inline and worker). Chunks are
// 4 KiB, so most sizes take several pipeline steps and none divides evenly by the chunk
// or the world size. Each rank computes the expected result from the input formula.
#include "../host/test_util.h"
#include "reference_data.h"

namespace commhost::test {
namespace {

// one_shot: every allreduce one-shot, every op inline; two_shot: every allreduce
// two-shot, every op on the worker thread.
std::string shmConfig(bool oneShot, const std::string& timeout = "20s") {
  const std::string options = oneShot ? "{ chunk: 4096, depth: 2, one_shot_max: 1GiB, inline_max: 1GiB }"
                                      : "{ chunk: 4096, depth: 3, one_shot_max: 0, inline_max: 0 }";
  return "group: { timeout: " + timeout +
         " }\n"
         "backends: { gloo: { options: { threads: 1, contexts: 1 } }, shm: { options: " +
         options +
         " } }\n"
         "routes: [{ backend: gloo }, { device: cpu, backend: shm }]\n";
}

struct Param {
  int world;
  bool oneShot;
};

class ShmWorld : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override { groups = makeGroups(shmConfig(GetParam().oneShot), GetParam().world); }
  void each(const std::function<void(ProcessGroup&, int)>& fn) {
    runRanks(GetParam().world, [&](int r) { fn(*groups[r], r); });
  }
  std::vector<std::shared_ptr<ProcessGroup>> groups;
};

TEST_P(ShmWorld, ReductionsEveryDTypeAndOp) {
  const int world = GetParam().world;
  each([&](ProcessGroup& pg, int rank) {
    for (int64_t n : {1, 37, 1531}) {  // 1531 x 8 B: three 4 KiB chunks and a remainder
      for (int d = 0; d < kNumDTypes; ++d) {
        const auto dtype = static_cast<DType>(d);
        for (int k = 0; k < ReduceOp::kNumKinds; ++k) {
          const auto kind = static_cast<ReduceOp::Kind>(k);
          if (!valid(dtype, kind)) continue;
          const ReduceOp op = kind == ReduceOp::PreMulSum ? ReduceOp::preMulSum(0.5) : ReduceOp(kind);
          const std::string what = std::string(dtypeName(dtype)) + " " + reduceOpName(kind) + " n " +
                                   std::to_string(n) + " rank " + std::to_string(rank);
          Tensor all = sourceTensor(dtype, rank, n);
          pg.allreduce(all, {op})->wait();
          const int root = static_cast<int>(n % world);
          Tensor red = sourceTensor(dtype, rank, n);
          pg.reduce(red, {root, op})->wait();
          Tensor rs = Tensor::empty({n}, dtype);
          pg.reduceScatterTensor(rs, sourceTensor(dtype, rank, n * world), {op})->wait();
          for (int64_t i = 0; i < n; ++i) {
            const double want = expected(dtype, kind, world, i);
            expectNear(all, i, want, "allreduce " + what);
            if (rank == root) expectNear(red, i, want, "reduce " + what);
            expectNear(rs, i, expected(dtype, kind, world, rank * n + i), "reduce_scatter " + what);
          }
        }
      }
    }
  });
}

// Avg of f16 values whose sum overflows f16 (max 65504) but whose mean fits: scaled in
// f32 before the one store, on both algorithms, for allreduce, reduce and reduce_scatter.
TEST_P(ShmWorld, HalfAvgOfLargeValuesDoesNotOverflow) {
  const int world = GetParam().world;
  each([&](ProcessGroup& pg, int rank) {
    constexpr int64_t n = 1531;
    auto filled = [](int64_t count) { return constantTensor(DType::Float16, count, 40000.0); };
    for (const ReduceOp op : {ReduceOp(ReduceOp::Avg), ReduceOp::preMulSum(0.5 / world)}) {
      const double want = op.kind == ReduceOp::Avg ? 40000.0 : 20000.0;
      Tensor all = filled(n);
      pg.allreduce(all, {op})->wait();
      Tensor red = filled(n);
      pg.reduce(red, {0, op})->wait();
      Tensor rs = Tensor::empty({n}, DType::Float16);
      pg.reduceScatterTensor(rs, filled(n * world), {op})->wait();
      for (int64_t i = 0; i < n; i += 97) {
        const std::string what = std::string(reduceOpName(op.kind)) + " rank " + std::to_string(rank);
        expectNear(all, i, want, "allreduce " + what);
        if (rank == 0) expectNear(red, i, want, "reduce " + what);
        expectNear(rs, i, want, "reduce_scatter " + what);
      }
    }
  });
}

TEST_P(ShmWorld, DataMovementOps) {
  const int world = GetParam().world;
  each([&](ProcessGroup& pg, int rank) {
    for (int64_t n : {1, 13, 3001}) {  // 3001 floats: 12004 bytes, not a multiple of anything
      const std::string at = " n " + std::to_string(n) + " rank " + std::to_string(rank);
      const int root = static_cast<int>((n + 1) % world);
      Tensor b = patternTensor(rank, n);
      pg.broadcast(b, {root})->wait();
      expectPattern(b, root, 0, n, "broadcast" + at);

      std::vector<Tensor> outs;
      for (int r = 0; r < world; ++r) outs.push_back(Tensor::empty({n}, DType::Float32));
      pg.allgather(outs, patternTensor(rank, n))->wait();
      for (int r = 0; r < world; ++r) expectPattern(outs[r], r, 0, n, "allgather" + at);

      Tensor flat = Tensor::empty({n * world}, DType::Float32);
      pg.allgatherIntoTensor(flat, patternTensor(rank, n))->wait();
      for (int r = 0; r < world; ++r) expectPattern(flat, r, r * n, n, "allgather_into_tensor" + at);

      std::vector<Tensor> gathered;
      if (rank == root)
        for (int r = 0; r < world; ++r) gathered.push_back(Tensor::empty({n}, DType::Float32));
      pg.gather(gathered, patternTensor(rank, n), {root})->wait();
      for (size_t r = 0; r < gathered.size(); ++r) expectPattern(gathered[r], static_cast<int>(r), 0, n, "gather" + at);

      std::vector<Tensor> parts;
      if (rank == root)
        for (int r = 0; r < world; ++r) parts.push_back(patternTensor(100 + r, n));
      Tensor mine = Tensor::empty({n}, DType::Float32);
      pg.scatter(mine, parts, {root})->wait();
      expectPattern(mine, 100 + rank, 0, n, "scatter" + at);

      std::vector<Tensor> rsIn;
      for (int r = 0; r < world; ++r) rsIn.push_back(patternTensor(rank + r, n));
      Tensor rs = Tensor::empty({n}, DType::Float32);
      pg.reduceScatter(rs, rsIn)->wait();
      for (int64_t i = 0; i < n; ++i) {
        float want = 0;
        for (int s = 0; s < world; ++s) want += patternValue(s + rank, i);
        ASSERT_EQ(rs.data_as<float>()[i], want) << "reduce_scatter" << at;
      }

      std::vector<Tensor> a2aIn, a2aOut;
      for (int r = 0; r < world; ++r) {
        a2aIn.push_back(patternTensor(rank * 10 + r, n));
        a2aOut.push_back(Tensor::empty({n}, DType::Float32));
      }
      pg.alltoall(a2aOut, a2aIn)->wait();
      for (int r = 0; r < world; ++r) expectPattern(a2aOut[r], r * 10 + rank, 0, n, "alltoall" + at);

      // Uneven: rank s sends (d + 1) * n rows of 2 floats to rank d.
      AlltoallSingleOptions splits;
      int64_t inRows = 0;
      for (int d = 0; d < world; ++d) {
        splits.inputSplitSizes.push_back((d + 1) * n);
        splits.outputSplitSizes.push_back((rank + 1) * n);
        inRows += (d + 1) * n;
      }
      Tensor in = Tensor::empty({inRows, 2}, DType::Float32);
      Tensor out = Tensor::empty({(rank + 1) * n * world, 2}, DType::Float32);
      for (int64_t row = 0, d = 0; d < world; ++d)
        for (int64_t k = 0; k < (d + 1) * n; ++k, ++row) in.data_as<float>()[2 * row + 1] = rank * 10 + d + k;
      pg.alltoallSingle(out, in, splits)->wait();
      for (int s = 0; s < world; ++s)
        for (int64_t k = 0; k < (rank + 1) * n; ++k)
          ASSERT_EQ(out.data_as<float>()[2 * (s * (rank + 1) * n + k) + 1], s * 10 + rank + k)
              << "alltoall_single" << at;

      pg.barrier()->wait();
    }
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, ShmWorld,
                         ::testing::Values(Param{1, true}, Param{2, true}, Param{2, false}, Param{3, true},
                                           Param{3, false}, Param{4, true}, Param{4, false}),
                         [](const auto& info) {
                           return "ranks" + std::to_string(info.param.world) +
                                  (info.param.oneShot ? "_one_shot_inline" : "_two_shot_worker");
                         });

}  // namespace
}  // namespace commhost::test
