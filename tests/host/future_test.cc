// SPDX-License-Identifier: Apache-2.0
#include <thread>

#include "test_util.h"

namespace commhost::test {
namespace {

TEST(Future, ThenChainsValuesAndErrors) {
  auto f = Future::create();
  Tensor t = Tensor::empty({4}, DType::Float32);
  auto next = f->then([](Future& done) {
    auto v = done.wait();
    v.push_back(v[0]);
    return v;
  });
  auto skipped = Future::create();
  bool ran = false;
  auto failed = skipped->then([&](Future&) {
    ran = true;
    return std::vector<Tensor>{};
  });
  EXPECT_FALSE(next->isCompleted());
  std::thread completer([&] { f->setValue({t}); });
  completer.join();
  EXPECT_EQ(next->wait().size(), 2u);
  skipped->setError(std::make_exception_ptr(BackendError("boom")));
  EXPECT_THROW(failed->wait(), BackendError);
  EXPECT_FALSE(ran);
  EXPECT_THROW(f->setValue({}), InvalidArgument);  // completes once
}

TEST(Future, WaitTimesOut) {
  auto f = Future::create();
  EXPECT_THROW(f->wait(std::chrono::milliseconds(20)), TimeoutError);
}

// Its Future is made on the first ask: every caller, from any thread, gets the same one,
// completed with the outputs the backend returned.
TEST(CompletedWork, EveryThreadGetsOneFutureHoldingTheOutputs) {
  Tensor t = Tensor::empty({4}, DType::Float32);
  t.data_as<float>()[2] = 7;
  OpContext ctx;
  ctx.timeout = std::chrono::milliseconds(1000);
  auto work = std::make_shared<CompletedWork>(ctx, std::vector<Tensor>{t});
  EXPECT_TRUE(work->wait());
  std::vector<FuturePtr> seen(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < seen.size(); ++i) threads.emplace_back([&, i] { seen[i] = work->future(); });
  for (auto& th : threads) th.join();
  for (const auto& f : seen) EXPECT_EQ(f, seen[0]);
  ASSERT_TRUE(seen[0]->isCompleted());
  const auto& outputs = seen[0]->wait();
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_EQ(outputs[0].data(), t.data());
  EXPECT_EQ(outputs[0].data_as<float>()[2], 7);
  EXPECT_EQ(work->future(), seen[0]);
}

// completedWork() holds its one tensor in place: the same guarantees as CompletedWork.
TEST(CompletedWork, OneTensorWorkGivesEveryThreadOneFutureHoldingIt) {
  Tensor t = Tensor::empty({4}, DType::Float32);
  t.data_as<float>()[2] = 7;
  OpContext ctx;
  ctx.timeout = std::chrono::milliseconds(1000);
  ctx.seq = 5;
  WorkPtr work = completedWork(ctx, t);
  EXPECT_TRUE(work->isCompleted());
  EXPECT_TRUE(work->wait());
  EXPECT_EQ(work->exception(), nullptr);
  EXPECT_EQ(work->seq(), 5u);
  std::vector<FuturePtr> seen(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < seen.size(); ++i) threads.emplace_back([&, i] { seen[i] = work->future(); });
  for (auto& th : threads) th.join();
  for (const auto& f : seen) EXPECT_EQ(f, seen[0]);
  const auto& outputs = seen[0]->wait();
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_EQ(outputs[0].data(), t.data());
  EXPECT_EQ(outputs[0].data_as<float>()[2], 7);
}

TEST(AsyncWork, FirstOfFinishFailAbortWins) {
  OpContext ctx;
  ctx.op = OpType::Allreduce;
  ctx.seq = 7;
  ctx.timeout = std::chrono::milliseconds(50);
  ctx.group = "main";
  ctx.rank = 2;
  auto work = std::make_shared<AsyncWork>(ctx);
  EXPECT_FALSE(work->isCompleted());
  EXPECT_THROW_WITH(work->wait(), TimeoutError, "[group main rank 2] allreduce seq 7: not completed within 50ms");
  work->abort("test abort");
  EXPECT_TRUE(work->isCompleted());
  EXPECT_FALSE(work->finish({}));
  EXPECT_THROW_WITH(work->wait(), AbortedError, "[group main rank 2] allreduce seq 7: aborted: test abort");
  EXPECT_EQ(work->seq(), 7u);
  EXPECT_EQ(work->op(), OpType::Allreduce);
}

}  // namespace
}  // namespace commhost::test
