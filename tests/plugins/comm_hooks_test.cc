// SPDX-License-Identifier: Apache-2.0
// The comm-hook plugins through makeCommHook, with ranks as threads over a HashStore and
// the real gloo backend: buckets built by hand (a flat buffer, views shaped like their
// parameters), each hook chosen by the config's hooks: table.
#include <cmath>
#include <random>

#include "../host/test_util.h"
#include "commhost/kernels/reduce.h"
#include "commhost/sdk/comm_hook.h"
#include "commhost/sdk/hook_sdk.h"

namespace commhost {
namespace {

using test::makeGroups;
using test::runRanks;

constexpr int kWorld = 3;
const std::chrono::milliseconds kWait{20000};

std::string configWith(const std::string& hooks) {
  return "group: { timeout: 20s }\nbackends: { gloo: { options: { threads: 2 } } }\n"
         "routes: [{ device: cpu, backend: gloo }]\n" +
         hooks;
}

// A bucket of gradients shaped `shapes`, element k of gradient i set to value(i, k).
GradBucket makeBucket(ProcessGroup& group, const std::vector<Shape>& shapes, DType dtype,
                      const std::function<double(size_t, int64_t)>& value, size_t index = 0, bool isLast = true) {
  int64_t total = 0;
  for (const auto& s : shapes) total += s.numel();
  GradBucket b;
  b.index = index;
  b.isLast = isLast;
  b.group = &group;
  b.buffer = Tensor::empty({total}, dtype);
  int64_t at = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    b.offsets.push_back(at);
    b.params.push_back(i);
    auto* p = static_cast<char*>(b.buffer.data()) + at * elementSize(dtype);
    b.gradients.push_back(Tensor::fromBlob(p, shapes[i], dtype, Device::cpu(), b.buffer.owner()));
    for (int64_t k = 0; k < shapes[i].numel(); ++k) kernels::setElement(b.buffer.data(), dtype, at + k, value(i, k));
    at += shapes[i].numel();
  }
  return b;
}

std::vector<double> values(const Tensor& t) {
  std::vector<double> out;
  for (int64_t k = 0; k < t.numel(); ++k) out.push_back(kernels::getElement(t.data(), t.dtype(), k));
  return out;
}

std::vector<double> run(CommHook& hook, GradBucket& bucket) {
  const FuturePtr done = hook.runHook(bucket);
  const std::vector<Tensor> value = done->wait(kWait);
  EXPECT_EQ(value.size(), 1u);
  EXPECT_EQ(value.at(0).data(), bucket.buffer.data()) << "the hook's result is the bucket's own buffer";
  return values(value.at(0));
}

const std::vector<Shape> kShapes = {{2, 3}, {4}, {3, 1, 2}};
// Rank r's element k of gradient i: (r + 1) * (i + 1 + k), so the average over 3 ranks is
// exactly 2 * (i + 1 + k).
double linear(int r, size_t i, int64_t k) { return (r + 1) * static_cast<double>(i + 1 + k); }
double linearMean(size_t i, int64_t k) { return 2.0 * static_cast<double>(i + 1 + k); }

void expectAverage(const GradBucket& b, const std::vector<double>& got, double relTol) {
  for (size_t i = 0; i < kShapes.size(); ++i)
    for (int64_t k = 0; k < kShapes[i].numel(); ++k) {
      const double want = linearMean(i, k), have = got[b.offsets[i] + k];
      if (relTol == 0) EXPECT_EQ(have, want) << "gradient " << i << " element " << k;
      else EXPECT_NEAR(have, want, relTol * std::abs(want)) << "gradient " << i << " element " << k;
    }
}

void checkAverages(const std::string& hooks, DType dtype, double relTol) {
  auto groups = makeGroups(configWith(hooks), kWorld);
  runRanks(kWorld, [&](int r) {
    auto hook = makeCommHook(*groups[r]);
    for (int iter = 0; iter < 2; ++iter) {
      GradBucket b = makeBucket(*groups[r], kShapes, dtype, [&](size_t i, int64_t k) { return linear(r, i, k); });
      expectAverage(b, run(*hook, b), relTol);
      // The views see the result: they are the buffer.
      EXPECT_EQ(kernels::getElement(b.gradients[1].data(), dtype, 2), kernels::getElement(b.buffer.data(), dtype, 8));
    }
  });
}

TEST(CommHooks, AllreduceAveragesExactly) {
  checkAverages("hooks: { gradient: { plugin: allreduce } }\n", DType::Float32, 0);
  checkAverages("hooks: { gradient: { plugin: allreduce } }\n", DType::Float64, 0);
}

TEST(CommHooks, NoHooksConfiguredGivesTheAllreduceAverage) {
  checkAverages("", DType::Float32, 0);
  auto groups = makeGroups(configWith(""), 1);
  EXPECT_FALSE(makeCommHook(*groups[0])->hasState());
  EXPECT_THROW(makeCommHook(*groups[0])->saveState(), NotSupportedError);
}

TEST(CommHooks, SixteenBitCompressionAveragesWithinTolerance) {
  // f16 keeps 11 significant bits (relative error 2^-11 per rounding), bf16 8 (2^-8):
  // one cast out, the division, the sum and the cast back.
  checkAverages("hooks: { gradient: { plugin: fp16_compress } }\n", DType::Float32, 4e-3);
  checkAverages("hooks: { gradient: { plugin: bf16_compress } }\n", DType::Float32, 3e-2);
  checkAverages("hooks: { gradient: { plugin: allreduce, wrap: bf16 } }\n", DType::Float32, 3e-2);
}

TEST(CommHooks, NoopLeavesTheBuffer) {
  auto groups = makeGroups(configWith("hooks: { gradient: { plugin: noop } }\n"), kWorld);
  runRanks(kWorld, [&](int r) {
    auto hook = makeCommHook(*groups[r]);
    GradBucket b = makeBucket(*groups[r], kShapes, DType::Float32,
                              [&](size_t i, int64_t k) { return linear(r, i, k); });
    const auto got = run(*hook, b);
    for (size_t i = 0; i < kShapes.size(); ++i)
      for (int64_t k = 0; k < kShapes[i].numel(); ++k) EXPECT_EQ(got[b.offsets[i] + k], linear(r, i, k));
  });
}

TEST(CommHooks, PowerSgdBeforeStartIterIsTheAllreduceAverage) {
  checkAverages("hooks: { gradient: { plugin: powersgd, options: { start_iter: 2 } } }\n", DType::Float32, 0);
}

// A rank-2 matrix scaled by (r + 1): the average over the ranks, 2 U V^T, is rank 2 too.
double lowRank(int r, int64_t row, int64_t col) {
  const double u0 = std::sin(0.3 * row + 1), u1 = std::cos(0.7 * row);
  const double v0 = std::cos(0.2 * col + 0.5), v1 = std::sin(1.1 * col);
  return (r + 1) * (u0 * v0 + 0.5 * u1 * v1);
}

void checkLowRank(const std::string& hooks, double tol) {
  const Shape shape{16, 12};
  auto groups = makeGroups(configWith(hooks), kWorld);
  runRanks(kWorld, [&](int r) {
    auto hook = makeCommHook(*groups[r]);
    for (int iter = 0; iter < 3; ++iter) {  // two plain, then one compressed
      GradBucket b = makeBucket(*groups[r], {shape}, DType::Float32,
                                [&](size_t, int64_t k) { return lowRank(r, k / 12, k % 12); });
      const auto got = run(*hook, b);
      for (int64_t k = 0; k < shape.numel(); ++k)
        EXPECT_NEAR(got[k], lowRank(1, k / 12, k % 12), tol) << "iteration " << iter << " element " << k;
    }
  });
}

TEST(CommHooks, PowerSgdReconstructsARankRInput) {
  checkLowRank("hooks: { gradient: { plugin: powersgd, options: { rank: 2, start_iter: 2 } } }\n", 1e-4);
  checkLowRank(
      "hooks: { gradient: { plugin: powersgd, options: { rank: 2, start_iter: 2, orthogonalization_epsilon: 1e-8 } } "
      "}\n",
      1e-3);
}

TEST(CommHooks, Fp16WrappedPowerSgdReconstructsARankRInput) {
  checkLowRank("hooks: { gradient: { plugin: powersgd, wrap: fp16, options: { rank: 2, start_iter: 2 } } }\n", 2e-2);
}

// Full-rank inputs that change every iteration, compressed to rank 1. Returns the largest
// |running sum of outputs - running sum of the ranks' mean inputs| after `steps` steps.
double runningSumGap(bool errorFeedback, int steps) {
  const Shape shape{12, 10};
  auto groups = makeGroups(
      configWith(std::string("hooks: { gradient: { plugin: powersgd, options: { start_iter: 2, error_feedback: ") +
                 (errorFeedback ? "true" : "false") + " } } }\n"),
      kWorld);
  // Three directions of about equal weight, plus a little noise of each rank's: rank 1
  // sends one direction per step, so without error feedback the other two are lost every
  // time; with it they build up in the error until they are sent.
  auto input = [](int r, int t, int64_t k) {
    const int64_t row = k / 10, col = k % 10;
    double v = 0;
    for (int j = 0; j < 3; ++j)
      v += (1.0 - 0.2 * j) * std::sin(0.5 * (j + 1) * row + j) * std::cos(0.3 * (j + 2) * col);
    return v + 0.05 * std::sin(7.0 * k + 13.0 * t + r);
  };
  std::vector<double> gaps(kWorld);
  runRanks(kWorld, [&](int r) {
    auto hook = makeCommHook(*groups[r]);
    std::vector<double> sumOut(shape.numel()), sumIn(shape.numel());
    for (int t = 0; t < steps + 2; ++t) {
      GradBucket b = makeBucket(*groups[r], {shape}, DType::Float32, [&](size_t, int64_t k) { return input(r, t, k); });
      const auto got = run(*hook, b);
      if (t < 2) continue;  // plain allreduce
      for (int64_t k = 0; k < shape.numel(); ++k) {
        sumOut[k] += got[k];
        for (int q = 0; q < kWorld; ++q) sumIn[k] += static_cast<float>(input(q, t, k)) / kWorld;
      }
    }
    for (int64_t k = 0; k < shape.numel(); ++k) gaps[r] = std::max(gaps[r], std::abs(sumOut[k] - sumIn[k]));
  });
  return gaps[0];
}

TEST(CommHooks, PowerSgdErrorFeedbackKeepsRunningSumsTogether) {
  // Without error feedback what rank 1 drops each step adds up; with it the gap is the
  // ranks' mean error after the last step, which stays bounded.
  const double with20 = runningSumGap(true, 20), with40 = runningSumGap(true, 40);
  const double without40 = runningSumGap(false, 40);
  std::printf("running-sum gap: %.4f after 20 steps, %.4f after 40 with error feedback; %.4f after 40 without\n",
              with20, with40, without40);
  EXPECT_LT(with40, 0.25 * without40) << "with " << with40 << ", without " << without40;
  EXPECT_LT(with40, 2.0 * std::max(with20, 1.0))
      << "the gap grows: " << with20 << " after 20, " << with40 << " after 40";
}

TEST(CommHooks, PowerSgdSmallTensorsBypassCompression) {
  // [64, 64] compresses at rank 1 ((64 + 64) * 2 < 4096); [4] (4 x 1) and [3, 3] do not.
  const std::vector<Shape> shapes = {{64, 64}, {4}, {3, 3}};
  auto groups = makeGroups(
      configWith("hooks:\n  gradient: { plugin: powersgd, options: { start_iter: 2 } }\n"
                 "  all: { plugin: powersgd, options: { start_iter: 2, min_compression_rate: 1e6 } }\n"),
      kWorld);
  runRanks(kWorld, [&](int r) {
    for (const char* name : {"gradient", "all"}) {
      auto hook = makeCommHook(*groups[r], name);
      for (int iter = 0; iter < 3; ++iter) {
        GradBucket b = makeBucket(*groups[r], shapes, DType::Float32, [&](size_t i, int64_t k) {
          return (r + 1) * static_cast<double>((i + 1) * (k % 7));
        });
        const auto got = run(*hook, b);
        bool allExact = true;
        for (size_t i = 0; i < shapes.size(); ++i)
          for (int64_t k = 0; k < shapes[i].numel(); ++k) {
            const double want = 2.0 * static_cast<double>((i + 1) * (k % 7));
            if (i > 0) {
              EXPECT_EQ(got[b.offsets[i] + k], want) << name << " gradient " << i << " element " << k;
            }
            allExact = allExact && got[b.offsets[i] + k] == want;
          }
        // The big one is approximated once compressing (rank 1 of a rank-7 pattern), unless
        // min_compression_rate sends it through the plain allreduce too.
        if (iter == 2) {
          EXPECT_EQ(allExact, std::string(name) == "all") << name;
        }
      }
    }
  });
}

TEST(CommHooks, PowerSgdStateRestoredContinuesTheSameApproximation) {
  const Shape shape{20, 8};
  const std::string yaml = "hooks: { gradient: { plugin: powersgd, options: { start_iter: 2, rank: 2 } } }\n";
  auto groups = makeGroups(configWith(yaml), kWorld);
  auto input = [](int r, int t, int64_t k) { return std::sin(0.37 * k * (t + 1) + r) + 0.1 * t; };
  runRanks(kWorld, [&](int r) {
    auto first = makeCommHook(*groups[r]);
    EXPECT_TRUE(first->hasState());
    for (int t = 0; t < 5; ++t) {
      GradBucket b = makeBucket(*groups[r], {shape}, DType::Float32, [&](size_t, int64_t k) { return input(r, t, k); });
      run(*first, b);
    }
    const std::vector<uint8_t> saved = first->saveState();
    auto resumed = makeCommHook(*groups[r]);
    resumed->loadState(saved);
    EXPECT_EQ(resumed->saveState(), saved);
    GradBucket a = makeBucket(*groups[r], {shape}, DType::Float32, [&](size_t, int64_t k) { return input(r, 5, k); });
    GradBucket b = makeBucket(*groups[r], {shape}, DType::Float32, [&](size_t, int64_t k) { return input(r, 5, k); });
    const auto fromFirst = run(*first, a);
    const auto fromResumed = run(*resumed, b);
    EXPECT_EQ(fromFirst, fromResumed);
    // A fresh hook (no state) computes something else: the state mattered.
    auto fresh = makeCommHook(*groups[r]);
    GradBucket c = makeBucket(*groups[r], {shape}, DType::Float32, [&](size_t, int64_t k) { return input(r, 5, k); });
    EXPECT_NE(run(*fresh, c), fromResumed);
    EXPECT_EQ(first->saveState(), resumed->saveState());
  });
  EXPECT_THROW_WITH(makeCommHook(*groups[0])->loadState({1, 2, 3}), InvalidArgument, "not a powersgd state");
}

TEST(CommHooks, WrappedPowerSgdSavesItsState) {
  auto groups = makeGroups(
      configWith("hooks: { gradient: { plugin: powersgd, wrap: bf16, options: { start_iter: 2 } } }\n"), 1);
  auto hook = makeCommHook(*groups[0]);
  EXPECT_TRUE(hook->hasState());
  GradBucket b = makeBucket(*groups[0], {{8, 8}}, DType::Float32, [](size_t, int64_t k) { return k; });
  for (int t = 0; t < 3; ++t) run(*hook, b);
  auto again = makeCommHook(*groups[0]);
  again->loadState(hook->saveState());
  EXPECT_EQ(again->saveState(), hook->saveState());
}

TEST(CommHooks, HookErrorsNameTheGroupRankAndHook) {
  auto groups = makeGroups(configWith("hooks: { gradient: { plugin: powersgd } }\n"), 1);
  auto hook = makeCommHook(*groups[0]);
  GradBucket ints = makeBucket(
      *groups[0], {{4}}, DType::Int32, [](size_t, int64_t k) { return k; }, 3);
  EXPECT_THROW_WITH(hook->runHook(ints), InvalidArgument, "[group main rank 0] powersgd: bucket 3 holds i32",
                    "use hook allreduce");
  GradBucket orphan = makeBucket(*groups[0], {{4}}, DType::Float32, [](size_t, int64_t k) { return k; });
  orphan.group = nullptr;
  EXPECT_THROW_WITH(hook->runHook(orphan), InvalidArgument, "powersgd: bucket 0 has no group", "GradBucket::group");
}

// A CUDA bucket takes the compression hooks' device path (the cast kernels, in a module
// libcommhost opens on demand), never a CPU loop over device memory. No machine has
// cuda:999, so the dispatch and its error are checked alike with and without a GPU.
TEST(CommHooks, SixteenBitCompressionCastsACudaBucketOnTheDevice) {
  auto groups = makeGroups(configWith("hooks: { gradient: { plugin: fp16_compress } }\n"), 1);
  auto hook = makeCommHook(*groups[0]);
  GradBucket b;
  b.group = groups[0].get();
  // Never dereferenced on the host: a CPU cast of it would crash this test.
  b.buffer = Tensor::fromBlob(reinterpret_cast<void*>(0x1000), {8}, DType::Float32, Device::cuda(999));
  b.gradients = {b.buffer};
  b.offsets = {0};
  b.params = {0};
#if COMMHOST_TEST_WITH_CUDA
  // The module loaded and CUDA said why cuda:999 cannot be used (no such device, or no
  // device or driver at all here).
  EXPECT_THROW_WITH(hook->runHook(b), BackendError,
                    "cast of f32[8] on cuda:999 to f16 (cudaSetDevice) on cuda:999 failed: ");
#else
  EXPECT_THROW_WITH(hook->runHook(b), NotSupportedError, "castTo(f32[8] on cuda:999, f16)", "built without CUDA");
#endif
  // What the kernels do not cast is refused by name, whatever the build.
  EXPECT_THROW_WITH(hooks::castTo(b.buffer, DType::Float64), NotSupportedError, "castTo(f32[8] on cuda:999, f64)",
                    "between f32 and f16/bf16 only");
  EXPECT_THROW_WITH(hooks::castTo(b.buffer, DType::Float16, 0.5), NotSupportedError, "without a factor");
  EXPECT_THROW_WITH(hooks::copyCast(Tensor::empty({8}, DType::Float16), b.buffer), InvalidArgument,
                    "different devices");
}

TEST(CommHooks, BadPowerSgdOptionsAreRefusedWhenCreated) {
  auto groups = makeGroups(configWith("hooks: { gradient: { plugin: powersgd, options: { start_iter: 1 } } }\n"), 1);
  EXPECT_THROW_WITH(makeCommHook(*groups[0]), PluginError, "powersgd", "start_iter is 1", "at least 2", "test.yaml:");
}

std::string loadError(const std::string& yaml) {
  auto registry = test::testRegistry();
  try {
    test::configFrom(yaml, *registry);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(CommHooks, TheLoaderRefusesWrapChainsThatMakeNoSense) {
  auto expectIn = [](const std::string& message, const std::vector<std::string>& fragments) {
    EXPECT_FALSE(message.empty()) << "the config loaded";
    for (const auto& f : fragments)
      EXPECT_NE(message.find(f), std::string::npos) << "lacks '" << f << "':\n" << message;
  };
  expectIn(loadError(configWith("hooks:\n  g: { plugin: fp16_compress, wrap: fp16 }\n")),
           {"test.yaml:5:", "hooks.g.wrap", "a wrapper around itself"});
  expectIn(loadError(configWith("hooks:\n  g: { plugin: powersgd, wrap: fp61 }\n")),
           {"test.yaml:5:", "unknown wrapper 'fp61'", "did you mean 'fp16'", "bf16 (bf16_compress)"});
  expectIn(loadError(configWith("hooks:\n  g: { plugin: allreduce, wrap: powersgd }\n")),
           {"test.yaml:5:", "'powersgd' cannot wrap another hook"});
  expectIn(loadError(configWith("hooks:\n  g: { plugin: allreduce, wrap: gloo }\n")),
           {"test.yaml:5:", "'gloo' is a backend plugin, not a comm-hook wrapper"});
  expectIn(loadError("group: { timeout: 20s }\nbackends: { gloo: { wrap: fp16 } }\n"
                     "routes: [{ device: cpu, backend: gloo }]\n"),
           {"test.yaml:2:", "backends.gloo.wrap", "only a comm hook"});
  expectIn(loadError(configWith("hooks:\n  g: { plugin: powersgdd }\n")),
           {"test.yaml:5:", "comm_hook plugin 'powersgdd' not found", "did you mean 'powersgd'"});
  expectIn(loadError(configWith("hooks:\n  g: { plugin: powersgd, options: { rank: 0 } }\n")),
           {"test.yaml:5:", "rank"});
  // A sensible chain loads, and the effective config shows it.
  auto registry = test::testRegistry();
  auto cfg = test::configFrom(configWith("hooks: { gradient: { plugin: powersgd, wrap: fp16 } }\n"), *registry);
  EXPECT_EQ(cfg->hooks.at("gradient").wrap, "fp16_compress");
  EXPECT_NE(cfg->effectiveYaml.find("wrap: fp16_compress"), std::string::npos) << cfg->effectiveYaml;
}

}  // namespace
}  // namespace commhost
