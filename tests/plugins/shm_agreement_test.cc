// SPDX-License-Identifier: Apache-2.0
// The shm backend's agreement check: ranks that issue different collectives (element
// count, dtype, reduce op, root, op) fail on every rank with InvalidArgument naming both
// ranks and both sizes, before any peer's data is read, and the group stays usable: the
// next correct op succeeds on every rank. Sizes on both sides of the line path and of one
// chunk (several pipeline steps), through one-shot/inline and two-shot/worker alike.
// What may legitimately differ per rank (root-only lists, alltoall split sizes) passes.
#include "../host/test_util.h"

namespace commhost::test {
namespace {

// The same two configs as shm_test.cc: chunk 4 KiB, so 3000 floats take three steps.
std::string shmConfig(bool oneShot) {
  const std::string options = oneShot ? "{ chunk: 4096, depth: 2, one_shot_max: 1GiB, inline_max: 1GiB }"
                                      : "{ chunk: 4096, depth: 3, one_shot_max: 0, inline_max: 0 }";
  return "group: { timeout: 20s }\n"
         "backends: { gloo: { options: { threads: 1, contexts: 1 } }, shm: { options: " +
         options +
         " } }\n"
         "routes: [{ backend: gloo }, { device: cpu, backend: shm }]\n";
}

Tensor floats(int64_t n, float v = 1.0f) {
  Tensor t = Tensor::empty({n}, DType::Float32);
  for (int64_t i = 0; i < n; ++i) t.data_as<float>()[i] = v;
  return t;
}

std::vector<Tensor> floatList(int world, int64_t n) {
  std::vector<Tensor> out;
  out.reserve(world);
  for (int r = 0; r < world; ++r) out.push_back(floats(n));
  return out;
}

struct Case {
  const char* name;
  // Issues the collective as rank `rank` (the odd one out is the last rank) and waits.
  std::function<void(ProcessGroup&, int rank, int world)> issue;
  std::vector<std::string> fragments;  // every rank's error has these ({last}: the last rank)
};

std::vector<Case> cases() {
  auto odd = [](int rank, int world) { return rank == world - 1; };
  return {
      {"allreduce 2 vs 8 elements (line path both)",
       [=](ProcessGroup& pg, int r, int w) {
         Tensor t = floats(odd(r, w) ? 8 : 2);
         pg.allreduce(t)->wait();
       },
       {"rank 0 issued allreduce of 2 x f32 (8 bytes, sum)",
        "rank {last} issued allreduce of 8 x f32 (32 bytes, sum)"}},
      {"allreduce 2 vs 3000 elements (line vs several chunks)",
       [=](ProcessGroup& pg, int r, int w) {
         Tensor t = floats(odd(r, w) ? 3000 : 2);
         pg.allreduce(t)->wait();
       },
       {"rank 0 issued allreduce of 2 x f32 (8 bytes", "rank {last} issued allreduce of 3000 x f32 (12000 bytes"}},
      {"allreduce 3000 vs 1100 elements (both several chunks)",
       [=](ProcessGroup& pg, int r, int w) {
         Tensor t = floats(odd(r, w) ? 1100 : 3000);
         pg.allreduce(t)->wait();
       },
       {"of 3000 x f32 (12000 bytes", "rank {last} issued allreduce of 1100 x f32 (4400 bytes"}},
      {"allreduce dtype",
       [=](ProcessGroup& pg, int r, int w) {
         Tensor t = odd(r, w) ? Tensor::empty({4}, DType::Int32) : floats(4);
         pg.allreduce(t)->wait();
       },
       {"4 x f32", "rank {last} issued allreduce of 4 x i32"}},
      {"allreduce reduce op",
       [=](ProcessGroup& pg, int r, int w) {
         Tensor t = floats(600);
         pg.allreduce(t, {odd(r, w) ? ReduceOp::Max : ReduceOp::Sum})->wait();
       },
       {"(2400 bytes, sum)", "rank {last} issued allreduce of 600 x f32 (2400 bytes, max)"}},
      {"allreduce_coalesced second tensor",
       [=](ProcessGroup& pg, int r, int w) {
         std::vector<Tensor> ts{floats(5), floats(odd(r, w) ? 7 : 6)};
         pg.allreduceCoalesced(ts)->wait();
       },
       {"allreduce_coalesced of 6 x f32", "rank {last} issued allreduce_coalesced of 7 x f32"}},
      {"reduce root",
       [=](ProcessGroup& pg, int r, int w) {
         Tensor t = floats(3);
         pg.reduce(t, {odd(r, w) ? 1 : 0})->wait();
       },
       {"root 0)", "rank {last} issued reduce of 3 x f32 (12 bytes, sum, root 1)"}},
      {"broadcast size (root larger)",
       [=](ProcessGroup& pg, int r, int w) {
         Tensor t = floats(odd(r, w) ? 10 : 5000);
         pg.broadcast(t, {0})->wait();
       },
       {"rank 0 issued broadcast of 5000 x f32 (20000 bytes, root 0)", "rank {last} issued broadcast of 10 x f32"}},
      {"broadcast root",
       [=](ProcessGroup& pg, int r, int w) {
         Tensor t = floats(10);
         pg.broadcast(t, {odd(r, w) ? 1 : 0})->wait();
       },
       {"root 0)", "rank {last} issued broadcast of 10 x f32 (40 bytes, root 1)"}},
      {"allgather input size",
       [=](ProcessGroup& pg, int r, int w) {
         const int64_t n = odd(r, w) ? 1500 : 3;
         auto outs = floatList(w, n);
         pg.allgather(outs, floats(n))->wait();
       },
       {"allgather of 3 x f32", "rank {last} issued allgather of 1500 x f32"}},
      {"allgather_into_tensor input size",
       [=](ProcessGroup& pg, int r, int w) {
         const int64_t n = odd(r, w) ? 4 : 3;
         Tensor out = floats(n * w);
         pg.allgatherIntoTensor(out, floats(n))->wait();
       },
       {"allgather_into_tensor of 3 x f32", "rank {last} issued allgather_into_tensor of 4 x f32"}},
      {"gather input size",
       [=](ProcessGroup& pg, int r, int w) {
         const int64_t n = odd(r, w) ? 2000 : 8;
         std::vector<Tensor> outs;
         if (r == 0) outs = floatList(w, n);
         pg.gather(outs, floats(n), {0})->wait();
       },
       {"gather of 8 x f32 (32 bytes, root 0)", "rank {last} issued gather of 2000 x f32"}},
      {"scatter output size",
       [=](ProcessGroup& pg, int r, int w) {
         const int64_t n = odd(r, w) ? 9 : 8;
         std::vector<Tensor> ins;
         if (r == 0) ins = floatList(w, n);
         Tensor out = floats(n);
         pg.scatter(out, ins, {0})->wait();
       },
       {"scatter of 8 x f32 (32 bytes, root 0)", "rank {last} issued scatter of 9 x f32"}},
      {"reduce_scatter output size",
       [=](ProcessGroup& pg, int r, int w) {
         const int64_t n = odd(r, w) ? 1200 : 10;
         Tensor out = floats(n);
         pg.reduceScatter(out, floatList(w, n))->wait();
       },
       {"reduce_scatter of 10 x f32", "rank {last} issued reduce_scatter of 1200 x f32"}},
      {"reduce_scatter_tensor output size",
       [=](ProcessGroup& pg, int r, int w) {
         const int64_t n = odd(r, w) ? 11 : 10;
         Tensor out = floats(n);
         pg.reduceScatterTensor(out, floats(n * w))->wait();
       },
       {"reduce_scatter_tensor of 10 x f32", "rank {last} issued reduce_scatter_tensor of 11 x f32"}},
      {"alltoall dtype",
       [=](ProcessGroup& pg, int r, int w) {
         std::vector<Tensor> ins, outs;
         for (int d = 0; d < w; ++d) {
           ins.push_back(odd(r, w) ? Tensor::empty({2}, DType::Int32) : floats(2));
           outs.push_back(odd(r, w) ? Tensor::empty({2}, DType::Int32) : floats(2));
         }
         pg.alltoall(outs, ins)->wait();
       },
       {"rank 0 issued alltoall of f32", "rank {last} issued alltoall of i32"}},
      {"alltoall_single dtype",
       [=](ProcessGroup& pg, int r, int w) {
         const DType dt = odd(r, w) ? DType::Int32 : DType::Float32;
         Tensor in = Tensor::empty({w}, dt), out = Tensor::empty({w}, dt);
         pg.alltoallSingle(out, in, {})->wait();
       },
       {"rank 0 issued alltoall_single of f32", "rank {last} issued alltoall_single of i32"}},
      {"allreduce vs broadcast",
       [=](ProcessGroup& pg, int r, int w) {
         Tensor t = floats(4);
         if (odd(r, w)) pg.broadcast(t, {0})->wait();
         else pg.allreduce(t)->wait();
       },
       {"rank 0 issued allreduce of 4 x f32", "rank {last} issued broadcast of 4 x f32"}},
      {"barrier vs allreduce",
       [=](ProcessGroup& pg, int r, int w) {
         Tensor t = floats(4);
         if (odd(r, w)) pg.barrier()->wait();
         else pg.allreduce(t)->wait();
       },
       {"rank 0 issued allreduce of 4 x f32", "rank {last} issued barrier"}},
      {"0 vs 4 elements",
       [=](ProcessGroup& pg, int r, int w) {
         Tensor t = floats(odd(r, w) ? 4 : 0);
         pg.broadcast(t, {0})->wait();
       },
       {"rank 0 issued broadcast of 0 x f32", "rank {last} issued broadcast of 4 x f32"}},
  };
}

std::string replaceLast(std::string s, int last) {
  const std::string tag = "{last}";
  for (size_t at; (at = s.find(tag)) != std::string::npos;) s.replace(at, tag.size(), std::to_string(last));
  return s;
}

struct Param {
  int world;
  bool oneShot;
};

class ShmAgreement : public ::testing::TestWithParam<Param> {};

TEST_P(ShmAgreement, MismatchFailsEveryRankAndTheGroupGoesOn) {
  const int world = GetParam().world;
  auto groups = makeGroups(shmConfig(GetParam().oneShot), world);
  const auto all = cases();
  runRanks(world, [&](int r) {
    ProcessGroup& pg = *groups[r];
    for (const auto& c : all) {
      const std::string at = std::string(c.name) + " rank " + std::to_string(r);
      try {
        c.issue(pg, r, world);
        ADD_FAILURE() << at << ": no error";
      } catch (const InvalidArgument& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("rank " + std::to_string(r) + "]"), std::string::npos) << at << ": " << what;
        EXPECT_NE(what.find("the ranks issued different collectives"), std::string::npos) << at << ": " << what;
        for (const auto& f : c.fragments)
          EXPECT_NE(what.find(replaceLast(f, world - 1)), std::string::npos)
              << at << ": lacks '" << replaceLast(f, world - 1) << "':\n"
              << what;
      }
      // Still in step: a correct op (several chunks) gives the right sum everywhere.
      Tensor t = floats(2500, static_cast<float>(r + 1));
      pg.allreduce(t)->wait();
      const float want = static_cast<float>(world * (world + 1)) / 2;
      ASSERT_EQ(t.data_as<float>()[0], want) << "after " << at;
      ASSERT_EQ(t.data_as<float>()[2499], want) << "after " << at;
      Tensor small = floats(2, static_cast<float>(r + 1));
      pg.allreduce(small)->wait();
      ASSERT_EQ(small.data_as<float>()[1], want) << "after " << at;
    }
  });
}

// One rank passes fewer tensors to a coalesced op and issues the rest as its next op:
// the shapes agree step by step, but the ops do not (the signature carries the seq), so
// every rank fails instead of reducing one op's tensor with another's.
TEST_P(ShmAgreement, CoalescedTensorCountMismatchIsCaught) {
  const int world = GetParam().world;
  auto groups = makeGroups(shmConfig(GetParam().oneShot), world);
  runRanks(world, [&](int r) {
    ProcessGroup& pg = *groups[r];
    const bool odd = r == world - 1;
    try {
      if (odd) {
        std::vector<Tensor> first{floats(5)};
        pg.allreduceCoalesced(first)->wait();  // pairs with the others' first tensor
        std::vector<Tensor> second{floats(6)};
        pg.allreduceCoalesced(second)->wait();
      } else {
        std::vector<Tensor> both{floats(5), floats(6)};
        pg.allreduceCoalesced(both)->wait();
      }
      ADD_FAILURE() << "rank " << r << ": no error";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("coalesced ops must pass as many tensors on every rank"), std::string::npos)
          << "rank " << r << ": " << e.what();
    }
  });
}

// Per-rank differences that are legitimate are not flagged: root-only lists, uneven
// alltoall_single splits, a rank sending nothing to a peer.
TEST_P(ShmAgreement, LegitimateDifferencesPass) {
  const int world = GetParam().world;
  auto groups = makeGroups(shmConfig(GetParam().oneShot), world);
  runRanks(world, [&](int r) {
    ProcessGroup& pg = *groups[r];
    std::vector<Tensor> outs;
    if (r == 1 % world) outs = floatList(world, 1500);
    pg.gather(outs, floats(1500, static_cast<float>(r)), {1 % world})->wait();
    for (size_t s = 0; s < outs.size(); ++s) ASSERT_EQ(outs[s].data_as<float>()[1499], static_cast<float>(s));

    std::vector<Tensor> ins;
    if (r == 0) ins = floatList(world, 7);
    Tensor mine = floats(7, -1.0f);
    pg.scatter(mine, ins, {0})->wait();
    ASSERT_EQ(mine.data_as<float>()[6], 1.0f);

    // Rank s sends s + d rows to rank d (rank 0 sends rank 0 nothing).
    AlltoallSingleOptions splits;
    int64_t inRows = 0, outRows = 0;
    for (int d = 0; d < world; ++d) {
      splits.inputSplitSizes.push_back(r + d);
      splits.outputSplitSizes.push_back(d + r);
      inRows += r + d;
      outRows += d + r;
    }
    Tensor in = Tensor::empty({inRows, 3}, DType::Float32);
    Tensor out = Tensor::empty({outRows, 3}, DType::Float32);
    for (int64_t i = 0; i < inRows * 3; ++i) in.data_as<float>()[i] = static_cast<float>(r);
    pg.alltoallSingle(out, in, splits)->wait();
    int64_t row = 0;
    for (int s = 0; s < world; ++s)
      for (int64_t k = 0; k < s + r; ++k, ++row) ASSERT_EQ(out.data_as<float>()[row * 3], static_cast<float>(s));
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, ShmAgreement,
                         ::testing::Values(Param{2, true}, Param{2, false}, Param{3, true}, Param{3, false}),
                         [](const auto& info) {
                           return "ranks" + std::to_string(info.param.world) +
                                  (info.param.oneShot ? "_one_shot_inline" : "_two_shot_worker");
                         });

}  // namespace
}  // namespace commhost::test
