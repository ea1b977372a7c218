// SPDX-License-Identifier: Apache-2.0
// The Work contract's value: a work completes with the op's output tensors. A backend
// (`shortvalue`, storecoll's allgathers with a short value) that hands back something
// else fails the op with a BackendError naming the backend, op and seq and both shapes,
// instead of passing the wrong value to whoever reads it. Ranks are threads.
#include <gtest/gtest.h>

#include "commhost/errors.h"
#include "commhost/process_group.h"
#include "supervisor/output_check.h"
#include "test_util.h"

namespace commhost::test {
namespace {

const char* kConfig =
    "group: { timeout: 20s }\n"
    "backends: { short: { plugin: shortvalue } }\n"
    "routes: [{ device: cpu, backend: short }]\n";

std::string errorOf(const WorkPtr& work) {
  try {
    work->wait();
  } catch (const BackendError& e) {
    return e.what();
  }
  return "";
}

TEST(WorkContract, AValueOtherThanTheOutputsFailsTheOpNamingTheBackend) {
  auto groups = makeGroups(kConfig, 2);
  std::vector<std::string> gathered(2), intoTensor(2);
  runRanks(2, [&](int r) {
    checkedAllreduce(*groups[r], 1);  // its value is right: it passes
    Tensor in = Tensor::empty({4}, DType::Float32);
    std::vector<Tensor> outs = {Tensor::empty({4}, DType::Float32), Tensor::empty({4}, DType::Float32)};
    gathered[r] = errorOf(groups[r]->allgather(outs, in));
    Tensor out = Tensor::empty({8}, DType::Float32);
    intoTensor[r] = errorOf(groups[r]->allgatherIntoTensor(out, in));
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(gathered[r].find("[group main rank " + std::to_string(r) + "] allgather seq 2"), std::string::npos)
        << gathered[r];
    EXPECT_NE(gathered[r].find("backend 'short' completed it with 1 tensor(s) of 4 element(s) in all, but the "
                               "call's outputs are 2 tensor(s) of 8 element(s) in all (f32)"),
              std::string::npos)
        << gathered[r];
    EXPECT_NE(gathered[r].find("broke the Work contract"), std::string::npos);
    EXPECT_NE(intoTensor[r].find("allgather_into_tensor seq 3"), std::string::npos) << intoTensor[r];
    EXPECT_NE(intoTensor[r].find("1 tensor(s) of 4 element(s) in all, but the call's outputs are 1 tensor(s) of 8"),
              std::string::npos)
        << intoTensor[r];
  }
}

TEST(WorkContract, TheCheckComparesCountElementsAndDtype) {
  using supervisor::OutputSpec;
  const Tensor a = Tensor::empty({4}, DType::Float32), b = Tensor::empty({4}, DType::Float32);
  const OutputSpec two = OutputSpec::of(std::vector<Tensor>{a, b});
  EXPECT_EQ(supervisor::outputMismatch(two, {a, b}), "");
  EXPECT_NE(supervisor::outputMismatch(two, {a}), "");
  EXPECT_NE(supervisor::outputMismatch(two, {a, Tensor::empty({3}, DType::Float32)}), "");
  const std::string dtype = supervisor::outputMismatch(OutputSpec::of(a), {Tensor::empty({4}, DType::Int32)});
  EXPECT_NE(dtype.find("(dtypes i32)"), std::string::npos) << dtype;
  EXPECT_EQ(supervisor::outputMismatch(OutputSpec{}, {}), "");  // unchecked
}

// The supervisor's inline check reads a completedWork's one tensor as it reads a
// CompletedWork's vector, and leaves it unchecked once its future was taken.
TEST(WorkContract, TheInlineCheckReadsAOneTensorWork) {
  using supervisor::OutputSpec;
  OpContext ctx;
  const Tensor four = Tensor::empty({4}, DType::Float32);
  WorkPtr work = completedWork(ctx, four);
  EXPECT_TRUE(supervisor::inlineValueMatches(*work, OutputSpec::of(four)));
  const OutputSpec eight = OutputSpec::of(Tensor::empty({8}, DType::Float32));
  EXPECT_FALSE(supervisor::inlineValueMatches(*work, eight));
  EXPECT_EQ(supervisor::inlineValueMismatch(*work, eight),
            "1 tensor(s) of 4 element(s) in all, but the call's outputs are 1 tensor(s) of 8 element(s) in all (f32)");
  EXPECT_FALSE(supervisor::inlineValueMatches(*work, OutputSpec::of(Tensor::empty({4}, DType::Int32))));
  EXPECT_FALSE(supervisor::inlineValueMatches(*work, OutputSpec::of(std::vector<Tensor>{four, four})));
  work->future();
  EXPECT_TRUE(supervisor::inlineValueMatches(*work, eight));
}

}  // namespace
}  // namespace commhost::test
