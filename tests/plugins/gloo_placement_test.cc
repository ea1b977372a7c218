// SPDX-License-Identifier: Apache-2.0
// gloo's thread placement (plugins/gloo/placement.h): the plan for each mode, and a real
// backend's threads where the plan puts them: Gloo's transport thread (named "gloo
// transport") on the upper half of the CPUs, the op worker on the lower half.
#include <dirent.h>
#include <sched.h>

#include <fstream>
#include <map>
#include <thread>

#include "../../plugins/gloo/placement.h"
#include "../host/test_util.h"
#include "commhost/sdk/backend_sdk.h"

namespace commhost::gloo_backend {
namespace {

TEST(GlooPlacement, PlanSplitsOnlyWhenAsked) {
  const std::vector<int> two{0, 1};
  EXPECT_FALSE(plan(ThreadPlacement::Off, 8, two));
  EXPECT_FALSE(plan(ThreadPlacement::Split, 2, {3})) << "one CPU cannot be split";
  EXPECT_FALSE(plan(ThreadPlacement::Auto, 2, {0, 1, 2, 3})) << "two CPUs per rank: the scheduler copes";
  EXPECT_FALSE(plan(ThreadPlacement::Auto, 1, two));

  auto twoRanks = plan(ThreadPlacement::Auto, 2, two);
  ASSERT_TRUE(twoRanks);
  EXPECT_EQ(twoRanks->workers, std::vector<int>{0});
  EXPECT_EQ(twoRanks->transport, std::vector<int>{1});
  EXPECT_EQ(twoRanks->describe(), "transport thread on CPU 1, op workers on CPU 0");

  auto odd = plan(ThreadPlacement::Auto, 3, {0, 1, 2, 3, 4});
  ASSERT_TRUE(odd);
  EXPECT_EQ(odd->workers, (std::vector<int>{0, 1}));
  EXPECT_EQ(odd->transport, (std::vector<int>{2, 3, 4}));

  // A cpuset with holes: halves of the CPUs this process may use, not of their numbers.
  auto holes = plan(ThreadPlacement::Split, 1, {0, 2, 5, 7});
  ASSERT_TRUE(holes);
  EXPECT_EQ(holes->workers, (std::vector<int>{0, 2}));
  EXPECT_EQ(holes->transport, (std::vector<int>{5, 7}));
}

TEST(GlooPlacement, CpuListReadsLikeTaskset) {
  EXPECT_EQ(cpuList({}), "");
  EXPECT_EQ(cpuList({4}), "4");
  EXPECT_EQ(cpuList({0, 1, 2, 5, 7, 8}), "0-2,5,7-8");
}

// Every thread of this process: its name and the CPUs it may run on.
struct ThreadInfo {
  std::string name;
  std::vector<int> cpus;
};
std::map<int, ThreadInfo> threads() {
  std::map<int, ThreadInfo> out;
  DIR* dir = ::opendir("/proc/self/task");
  if (dir == nullptr) return out;
  while (dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    const int tid = std::atoi(entry->d_name);
    ThreadInfo info;
    std::getline(std::ifstream(std::string("/proc/self/task/") + entry->d_name + "/comm"), info.name);
    cpu_set_t set;
    CPU_ZERO(&set);
    if (::sched_getaffinity(tid, sizeof(set), &set) != 0) continue;  // exited meanwhile
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &set)) info.cpus.push_back(cpu);
    out[tid] = info;
  }
  ::closedir(dir);
  return out;
}

// The threads that `fn` starts and that still run when it returns.
std::map<int, ThreadInfo> threadsStartedBy(const std::function<void()>& fn) {
  const auto before = threads();
  fn();
  auto after = threads();
  for (const auto& [tid, info] : before) after.erase(tid);
  return after;
}

std::vector<std::shared_ptr<ProcessGroup>> twoRanksAllreducing(const std::string& placement) {
  auto groups = test::makeGroups(
      "group: { timeout: 20s }\n"
      "backends: { gloo: { options: { threads: 1, thread_placement: " +
          placement + " } } }\nroutes: [{ device: cpu, backend: gloo }]\n",
      2);
  test::runRanks(2, [&](int r) {
    const auto mine = allowedCpus();
    Tensor t = Tensor::empty({4}, DType::Float32);
    t.data_as<float>()[0] = static_cast<float>(r + 1);
    groups[r]->allreduce(t)->wait();  // small: runs on this thread (inline_max)
    EXPECT_EQ(t.data_as<float>()[0], 3.0f);
    EXPECT_EQ(allowedCpus(), mine) << "the application's thread ran an op and must stay where it was";
  });
  return groups;
}

TEST(GlooPlacement, SplitPutsTheTransportAndTheWorkersOnTheirHalves) {
  const auto cpus = allowedCpus();
  if (cpus.size() < 2) GTEST_SKIP() << "one CPU: nothing to split";
  const auto expected = plan(ThreadPlacement::Split, 2, cpus);
  ASSERT_TRUE(expected);
  std::vector<std::shared_ptr<ProcessGroup>> groups;
  const auto before = threads();
  groups = twoRanksAllreducing("split");
  // A worker moves itself as it starts, which on a busy machine may come a little later.
  int transports = 0, workers = 0;
  for (int attempt = 0; attempt < 200 && workers < 4; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    auto started = threads();
    for (const auto& [tid, info] : before) started.erase(tid);
    transports = workers = 0;
    for (const auto& [tid, info] : started) {
      if (info.name == "gloo transport") {
        ++transports;
        EXPECT_EQ(info.cpus, expected->transport) << "transport thread " << tid;
      } else if (info.cpus == expected->workers) {
        ++workers;
      }
    }
  }
  EXPECT_EQ(transports, 2) << "one transport thread per rank's backend";
  EXPECT_EQ(workers, 4) << "each rank's collectives worker and point-to-point worker, as they start";
}

TEST(GlooPlacement, OffLeavesEveryThreadWhereItWas) {
  const auto cpus = allowedCpus();
  std::vector<std::shared_ptr<ProcessGroup>> groups;
  const auto started = threadsStartedBy([&] { groups = twoRanksAllreducing("off"); });
  int transports = 0;
  for (const auto& [tid, info] : started) {
    transports += info.name == "gloo transport" ? 1 : 0;
    EXPECT_EQ(info.cpus, cpus) << info.name << " thread " << tid;
  }
  EXPECT_EQ(transports, 2);
}

}  // namespace
}  // namespace commhost::gloo_backend
