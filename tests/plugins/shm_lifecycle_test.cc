// SPDX-License-Identifier: Apache-2.0
// The shm backend's lifecycle and failure paths: concurrent groups, nothing left in
// /dev/shm, stale segments of dead creators removed, other hosts refused, and a missing
// peer or an abort ending a wait with an error naming rank, op, seq and peer.
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../host/test_util.h"
#include "commhost/sdk/backend_sdk.h"
#include "rendezvous.h"

namespace commhost::test {
namespace {

std::string config(const std::string& shmOptions, const std::string& extra = "") {
  return "group: { timeout: 20s }\n" + extra +
         "backends: { gloo: { options: { threads: 1, contexts: 1 } }, shm: { options: " + shmOptions +
         " } }\n"
         "routes: [{ backend: gloo }, { device: cpu, backend: shm }]\n";
}

float allreduceSum(ProcessGroup& pg, float mine, int64_t n) {
  Tensor t = Tensor::empty({n}, DType::Float32);
  for (int64_t i = 0; i < n; ++i) t.data_as<float>()[i] = mine;
  pg.allreduce(t)->wait();
  return t.data_as<float>()[n - 1];
}

TEST(Shm, ConcurrentGroupsAndSubgroupsLeaveNoSegment) {
  const std::string cfg = config("{ chunk: 4096 }");
  auto a = makeGroups(cfg, 4);
  auto b = makeGroups(cfg, 2);  // another job's world, used at the same time
  EXPECT_TRUE(ourSegments().empty()) << "segment names must be unlinked once every rank mapped them";
  std::thread other([&] {
    runRanks(2, [&](int r) {
      for (int i = 0; i < 200; ++i) ASSERT_EQ(allreduceSum(*b[r], r + 1.0f, 1 + i * 37), 3.0f);
    });
  });
  runRanks(4, [&](int r) {
    auto pair = a[r]->split(r / 2, r);  // {0,1} and {2,3}, each with its own segment
    ASSERT_NE(pair, nullptr);
    // Per rank: the pair's ops on a second thread while the main group runs on this one.
    const int pairIndex = r / 2;  // ranks 2k and 2k+1 form pair k: their sum is 4k + 3
    std::thread sub([&] {
      for (int i = 0; i < 100; ++i)
        ASSERT_EQ(allreduceSum(*pair, r + 1.0f, 5000 + i), static_cast<float>(pairIndex * 4 + 3));
    });
    for (int i = 0; i < 100; ++i) ASSERT_EQ(allreduceSum(*a[r], r + 1.0f, 1 + i * 101), 10.0f);
    sub.join();
  });
  other.join();
  EXPECT_TRUE(ourSegments().empty());
}

TEST(Shm, StaleSegmentsOfDeadCreatorsAreRemoved) {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ::waitpid(child, nullptr, 0);  // its pid now names no process
  const std::string dead = "/commhost-shm-0badc0de-" + std::to_string(child) + "-0";
  const std::string live = "/commhost-shm-0badc0de-" + std::to_string(::getpid()) + "-999";
  for (const auto& name : {dead, live}) {
    const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT, 0600);
    ASSERT_GE(fd, 0);
    ::close(fd);
  }
  EXPECT_GE(shm::removeStaleSegments(), 1);
  EXPECT_EQ(::shm_open(dead.c_str(), O_RDONLY, 0), -1) << "the dead creator's segment is still there";
  const int fd = ::shm_open(live.c_str(), O_RDONLY, 0);
  EXPECT_GE(fd, 0) << "a live creator's segment was removed";
  if (fd >= 0) ::close(fd);
  ::shm_unlink(live.c_str());
}

TEST(Shm, RefusesRanksOnAnotherHost) {
  BackendContext ctx;
  ctx.groupName = "main";
  ctx.rank = 0;
  ctx.worldSize = 2;
  ctx.timeout = std::chrono::seconds(5);
  ctx.store = std::make_shared<HashStore>(std::chrono::seconds(5));
  ctx.store->set("host/1", toBytes("elsewhere boot 1234"));  // what rank 1 on another host publishes
  const std::string here = hostIdentity();
  EXPECT_THROW_WITH(shm::checkSameHost(ctx), PluginError, "one host", "rank 1 runs on elsewhere boot 1234",
                    here.c_str());
}

TEST(Shm, MissingPeerTimesOutNamingItAndBreaksTheGroup) {
  // Without the supervisor, which would abort the group on the timeout: the backend alone.
  auto groups = makeGroups(config("{}", "supervisor: { enabled: false }\n"), 2);
  Tensor t = Tensor::empty({4}, DType::Float32);
  // Inline (small, idle): the call itself waits out the op's timeout.
  auto work = groups[0]->allreduce(t, {ReduceOp::Sum, std::chrono::milliseconds(300)});
  EXPECT_THROW_WITH(work->wait(), TimeoutError, "rank 0", "allreduce seq", "peer 1", "waiting for rank 1");
  EXPECT_THROW_WITH(groups[0]->allreduce(t), BackendError, "unusable", "timed out");
}

TEST(Shm, AlltoallSplitMismatchFailsEveryRankAlikeAndKeepsTheGroup) {
  auto groups = makeGroups(config("{}"), 2);
  runRanks(2, [&](int r) {
    // Rank 0 sends rank 1 two rows, but rank 1 expects three from it.
    AlltoallSingleOptions splits;
    splits.inputSplitSizes = {1, 2};
    splits.outputSplitSizes = r == 0 ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{3, 2};
    Tensor in = Tensor::empty({3}, DType::Float32);
    Tensor out = Tensor::empty({r == 0 ? 3 : 5}, DType::Float32);
    EXPECT_THROW_WITH(groups[r]->alltoallSingle(out, in, splits)->wait(), InvalidArgument,
                      "rank 0 sends 8 bytes to rank 1, which expects 12");
    EXPECT_EQ(allreduceSum(*groups[r], r + 1.0f, 3), 3.0f);  // still in step
  });
}

TEST(Shm, AbortEndsAQueuedWait) {
  auto groups = makeGroups(config("{ inline_max: 0 }"), 2);
  Tensor t = Tensor::empty({16}, DType::Float32);
  auto work = groups[0]->allreduce(t);  // rank 1 never joins
  groups[0]->abort("test abort");
  EXPECT_THROW_WITH(work->wait(), AbortedError, "test abort");
  EXPECT_THROW(groups[0]->allreduce(t), AbortedError);
}

}  // namespace
}  // namespace commhost::test
