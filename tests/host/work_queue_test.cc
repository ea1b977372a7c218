// SPDX-License-Identifier: Apache-2.0
// The SDK worker queue (commhost/sdk/work_queue.h) on its own: order, inline runs, errors,
// abort, drain and shutdown from other threads. Waits are bounded (5 s) for liveness.
#include "commhost/sdk/work_queue.h"

#include <condition_variable>
#include <future>

#include "core/tensor_work.h"
#include "test_util.h"

namespace commhost::test {
namespace {

using namespace std::chrono_literals;

OpContext op(uint64_t seq) {
  OpContext c;
  c.op = OpType::Allreduce;
  c.seq = seq;
  c.timeout = 5s;
  c.group = "q";
  c.rank = 0;
  return c;
}

// A gate jobs wait on until the test opens it.
class Gate {
 public:
  void open() {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = true;
    cv_.notify_all();
  }
  // Blocks until `n` jobs are waiting at the gate.
  void enter() {
    std::unique_lock<std::mutex> lock(mutex_);
    ++inside_;
    cv_.notify_all();
    cv_.wait_for(lock, 5s, [&] { return open_; });
  }
  bool awaitInside(int n) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, 5s, [&] { return inside_ >= n; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool open_ = false;
  int inside_ = 0;
};

std::string errorOf(const WorkPtr& work) {
  try {
    work->wait(5s);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(WorkQueue, RunsJobsInSubmissionOrderOnItsWorker) {
  WorkQueue queue("test queue", 1, {});
  std::mutex mutex;
  std::vector<int> order;
  std::vector<WorkPtr> works;
  const auto caller = std::this_thread::get_id();
  std::atomic<bool> onCaller{false};
  for (int i = 0; i < 100; ++i)
    works.push_back(queue.submit(op(i + 1), [&, i] {
      if (std::this_thread::get_id() == caller) onCaller = true;
      std::lock_guard<std::mutex> lock(mutex);
      order.push_back(i);
      return std::vector<Tensor>{};
    }));
  queue.drain();
  for (auto& w : works) EXPECT_TRUE(w->isCompleted());
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
  EXPECT_FALSE(onCaller);
}

// A worker that polls before sleeping (idleSpin) still runs every op once, in order, on
// itself, whether the next op comes while it polls or after it went to sleep; several
// workers polling at once do too; and the queue drains and shuts down.
TEST(WorkQueue, IdleSpinningWorkersRunEveryOpOnceInOrder) {
  for (int threads : {1, 3}) {
    WorkQueue queue("test queue", threads, {}, 2ms);
    std::mutex mutex;
    std::vector<int> order;
    const auto caller = std::this_thread::get_id();
    std::atomic<bool> onCaller{false};
    for (int i = 0; i < 60; ++i) {
      auto work = queue.submit(op(i + 1), [&, i] {
        if (std::this_thread::get_id() == caller) onCaller = true;
        std::lock_guard<std::mutex> lock(mutex);
        order.push_back(i);
        return std::vector<Tensor>{};
      });
      work->wait(5s);
      // Every 20th op comes after the polling ended (the worker sleeps), the others while it polls.
      if (i % 20 == 19) std::this_thread::sleep_for(10ms);
    }
    queue.drain();
    ASSERT_EQ(order.size(), 60u) << threads << " workers";
    for (int i = 0; i < 60; ++i) EXPECT_EQ(order[i], i);
    EXPECT_FALSE(onCaller);
  }
  EXPECT_GE(WorkQueue::usableCpus(), 1);
  EXPECT_LE(WorkQueue::usableCpus(), static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

TEST(WorkQueue, WithoutWorkersJobsRunInsideSubmit) {
  WorkQueue queue("test queue", 0, {});
  std::thread::id ranOn;
  auto work = queue.submit(op(1), [&] {
    ranOn = std::this_thread::get_id();
    return std::vector<Tensor>{Tensor::empty({2}, DType::Float32)};
  });
  EXPECT_EQ(ranOn, std::this_thread::get_id());
  EXPECT_TRUE(work->isCompleted());
  EXPECT_EQ(work->future()->wait(5s).size(), 1u);
}

// A job may return its one output tensor: run inline its work is a completedWork (no
// vector), queued an AsyncWork, and a work the caller passed is finished with it; either
// way the value is that tensor, alone.
TEST(WorkQueue, AJobReturningATensorCompletesWithThatTensor) {
  WorkQueue queue("test queue", 1, {});
  Tensor t = Tensor::empty({3}, DType::Int32);
  t.data_as<int32_t>()[1] = 42;
  const WorkPtr inlined = queue.submit(
      op(1), [t]() mutable { return std::move(t); }, true);
  const Work& inlinedWork = *inlined;
  ASSERT_TRUE(inlined->isCompleted());
  EXPECT_EQ(typeid(inlinedWork), typeid(TensorWork));
  auto given = std::make_shared<AsyncWork>(op(2));
  EXPECT_EQ(queue.submit(
                op(2), [t]() mutable { return std::move(t); }, true, given),
            given);
  EXPECT_TRUE(given->isCompleted());
  Gate gate;
  auto blocked = queue.submit(op(3), [&] {
    gate.enter();
    return std::vector<Tensor>{};
  });
  ASSERT_TRUE(gate.awaitInside(1));
  const WorkPtr queued = queue.submit(
      op(4), [t]() mutable { return std::move(t); }, true);
  const Work& queuedWork = *queued;
  EXPECT_FALSE(queued->isCompleted());
  EXPECT_EQ(typeid(queuedWork), typeid(AsyncWork));
  gate.open();
  for (const WorkPtr& work : {inlined, WorkPtr(given), queued}) {
    const std::vector<Tensor>& value = work->future()->wait(5s);
    ASSERT_EQ(value.size(), 1u);
    EXPECT_EQ(value[0].data(), t.data());
    EXPECT_EQ(value[0].data_as<int32_t>()[1], 42);
  }
}

TEST(WorkQueue, InlineWhenIdleRunsOnTheCallerOnlyWhenNothingIsQueuedOrRunning) {
  WorkQueue queue("test queue", 1, {});
  const auto caller = std::this_thread::get_id();
  std::thread::id first, second, third;
  queue.submit(
      op(1),
      [&] {
        first = std::this_thread::get_id();
        return std::vector<Tensor>{};
      },
      true);
  EXPECT_EQ(first, caller);
  EXPECT_TRUE(queue.idle());

  Gate gate;
  std::vector<int> order;
  auto blocked = queue.submit(op(2), [&] {
    gate.enter();
    order.push_back(2);
    return std::vector<Tensor>{};
  });
  ASSERT_TRUE(gate.awaitInside(1));
  // Busy: an inline-eligible op waits its turn on the worker instead of overtaking.
  auto queued = queue.submit(
      op(3),
      [&] {
        second = std::this_thread::get_id();
        order.push_back(3);
        return std::vector<Tensor>{};
      },
      true);
  EXPECT_FALSE(queued->isCompleted());
  gate.open();
  EXPECT_TRUE(queued->wait(5s));
  EXPECT_NE(second, caller);
  EXPECT_EQ(order, (std::vector<int>{2, 3}));
  queue.drain();
  queue.submit(
      op(4),
      [&] {
        third = std::this_thread::get_id();
        return std::vector<Tensor>{};
      },
      true);
  EXPECT_EQ(third, caller);
}

TEST(WorkQueue, JobErrorsGoThroughDescribeAndBeforeEachRunsFirst) {
  std::vector<uint64_t> before;
  WorkQueue::Hooks hooks;
  hooks.describe = [](const OpContext& c, const std::exception_ptr& e) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      return std::make_exception_ptr(PeerLostError("described seq " + std::to_string(c.seq) + ": " + ex.what()));
    }
  };
  hooks.beforeEach = [&](const OpContext& c) {
    before.push_back(c.seq);
    if (c.seq == 3) throw std::runtime_error("refused before running");
  };
  for (int threads : {0, 1}) {
    before.clear();
    WorkQueue queue("test queue", threads, hooks);
    auto ok = queue.submit(op(1), [] { return std::vector<Tensor>{}; });
    auto bad = queue.submit(op(2), []() -> std::vector<Tensor> { throw std::runtime_error("wire cut"); });
    bool ran3 = false;
    auto refused = queue.submit(op(3), [&] {
      ran3 = true;
      return std::vector<Tensor>{};
    });
    queue.drain();
    EXPECT_TRUE(ok->wait(5s));
    EXPECT_THROW_WITH(bad->wait(5s), PeerLostError, "described seq 2: wire cut");
    EXPECT_THROW_WITH(refused->wait(5s), PeerLostError, "described seq 3: refused before running");
    EXPECT_FALSE(ran3);
    EXPECT_EQ(before, (std::vector<uint64_t>{1, 2, 3})) << threads << " threads";
  }
}

TEST(WorkQueue, AbortFailsRunningAndQueuedWorksAndQueuedJobsNeverRun) {
  Gate gate;
  std::atomic<int> described{0};
  WorkQueue::Hooks hooks;
  hooks.describe = [&](const OpContext&, std::exception_ptr e) {
    ++described;
    return e;
  };
  WorkQueue queue("test queue", 1, hooks);
  auto running = queue.submit(op(1), []() -> std::vector<Tensor> { return {}; });
  ASSERT_TRUE(running->wait(5s));
  running = queue.submit(op(2), [&]() -> std::vector<Tensor> {
    gate.enter();
    throw std::runtime_error("the transport noticed the abort");
  });
  ASSERT_TRUE(gate.awaitInside(1));
  std::atomic<int> ran{0};
  std::vector<WorkPtr> queued;
  for (int i = 0; i < 3; ++i)
    queued.push_back(queue.submit(op(3 + i), [&] {
      ++ran;
      return std::vector<Tensor>{};
    }));

  queue.abort("peer 3 lost");
  EXPECT_TRUE(queue.stuckAfterAbort());  // the running job has not returned yet
  EXPECT_THROW_WITH(running->wait(5s), AbortedError, "peer 3 lost");
  for (auto& w : queued) EXPECT_THROW_WITH(w->wait(5s), AbortedError, "peer 3 lost");
  queue.drain();  // returns after abort even while a job still runs
  EXPECT_THROW_WITH(queue.submit(op(9), [] { return std::vector<Tensor>{}; }), AbortedError,
                    "[group q rank 0] allreduce seq 9: the test queue was aborted (peer 3 lost)");
  gate.open();
  // The running job's own error after the abort is dropped, not described.
  for (int i = 0; i < 500 && queue.stuckAfterAbort(); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_FALSE(queue.stuckAfterAbort());
  EXPECT_EQ(described.load(), 0);
  EXPECT_EQ(ran.load(), 0);
}

TEST(WorkQueue, DrainWaitsForQueuedAndRunningJobs) {
  Gate gate;
  WorkQueue queue("test queue", 2, {});
  std::atomic<int> done{0};
  for (int i = 0; i < 4; ++i)
    queue.submit(op(i + 1), [&] {
      gate.enter();
      ++done;
      return std::vector<Tensor>{};
    });
  ASSERT_TRUE(gate.awaitInside(2));
  auto drained = std::async(std::launch::async, [&] { queue.drain(); });
  // Two jobs are held at the gate: drain cannot have returned.
  EXPECT_EQ(drained.wait_for(50ms), std::future_status::timeout);
  gate.open();
  ASSERT_EQ(drained.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(done.load(), 4);
  EXPECT_TRUE(queue.idle());
}

TEST(WorkQueue, AbortFromAnotherThreadWhileSubmittingEndsEveryWork) {
  WorkQueue queue("test queue", 2, {});
  std::vector<WorkPtr> works;
  std::atomic<bool> aborted{false};
  std::thread aborter([&] {
    std::this_thread::sleep_for(1ms);
    queue.abort("shutting down");
    aborted = true;
  });
  int refused = 0;
  for (int i = 0; i < 20000 && refused == 0; ++i) {
    try {
      works.push_back(queue.submit(op(i + 1), [] {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        return std::vector<Tensor>{};
      }));
    } catch (const AbortedError& e) {
      EXPECT_NE(std::string(e.what()).find("shutting down"), std::string::npos) << e.what();
      ++refused;
    }
  }
  aborter.join();
  ASSERT_TRUE(aborted);
  // Every work ends: finished before the abort, or failed with AbortedError.
  for (auto& w : works) {
    const std::string error = errorOf(w);
    EXPECT_TRUE(w->isCompleted());
    if (!error.empty()) {
      EXPECT_NE(error.find("shutting down"), std::string::npos) << error;
    }
  }
  EXPECT_THROW(queue.submit(op(99999), [] { return std::vector<Tensor>{}; }), AbortedError);
}

TEST(WorkQueue, DestroyedFromAnotherThreadItDrainsFirst) {
  auto queue = std::make_unique<WorkQueue>("test queue", 1, WorkQueue::Hooks{});
  std::atomic<int> done{0};
  std::vector<WorkPtr> works;
  for (int i = 0; i < 50; ++i)
    works.push_back(queue->submit(op(i + 1), [&] {
      std::this_thread::sleep_for(100us);
      ++done;
      return std::vector<Tensor>{};
    }));
  std::thread([&] { queue.reset(); }).join();
  EXPECT_EQ(done.load(), 50);
  for (auto& w : works) EXPECT_TRUE(w->isCompleted());
}

}  // namespace
}  // namespace commhost::test
