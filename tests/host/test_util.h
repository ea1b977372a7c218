// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the unit tests: configs from text, and ranks as threads.
#pragma once

#include <gtest/gtest.h>

#include <dirent.h>
#include <unistd.h>

#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "commhost/commhost.h"

namespace commhost::test {

inline std::string pluginDir(const char* sub) { return std::string(COMMHOST_TEST_PLUGIN_DIR) + "/" + sub; }

// A registry holding the installed-beside plugins and the test plugins in good/.
inline std::shared_ptr<PluginRegistry> testRegistry() {
  auto registry = std::make_shared<PluginRegistry>();
  registry->scan(PluginRegistry::searchPath({pluginDir("good")}));
  return registry;
}

// A directory of this test's own for flight-recorder dumps: <tmp>/commhost-unit-<pid>/<Suite.Test>,
// removed when the test binary exits. Tests never dump into the working directory.
inline std::string testDumpDir() {
  namespace fs = std::filesystem;
  static const fs::path root = fs::temp_directory_path() / ("commhost-unit-" + std::to_string(::getpid()));
  static const struct Cleanup {
    ~Cleanup() {
      std::error_code ignored;
      fs::remove_all(root, ignored);
    }
  } cleanup;
  (void)cleanup;
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return (root / (info ? std::string(info->test_suite_name()) + "." + info->name() : std::string("none"))).string();
}

// Configs get the test's own dump dir unless the yaml or a --set names one.
inline std::shared_ptr<const Config> configFrom(const std::string& yaml, PluginRegistry& registry,
                                                const std::vector<std::string>& sets = {}) {
  ConfigOverrides overrides;
  overrides.set = sets;
  bool namesDumpDir = yaml.find("dump_dir") != std::string::npos;
  for (const auto& s : sets) namesDumpDir = namesDumpDir || s.find("dump_dir") != std::string::npos;
  if (!namesDumpDir) overrides.set.push_back("supervisor.flight_recorder.dump_dir=" + testDumpDir());
  overrides.fromEnvironment = false;
  return std::make_shared<Config>(loadConfigText(yaml, "test.yaml", registry, overrides));
}

// Entries of `dir` whose names start with `prefix` (leak tests: /proc/self/fd, /proc/self/task,
// /dev/shm).
// This process's resident set (VmRSS), in KiB; 0 when /proc says nothing.
inline long residentKiB() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return 0;
}

inline size_t countEntries(const char* dir, const std::string& prefix = "") {
  size_t n = 0;
  if (DIR* d = ::opendir(dir)) {
    while (dirent* e = ::readdir(d))
      if (e->d_name[0] != '.' && std::string(e->d_name).rfind(prefix, 0) == 0) ++n;
    ::closedir(d);
  }
  return n;
}

// Names in /dev/shm of shm segments created by this process
// ("commhost-shm-<jobhash>-<pid>-<groupid>"): tests that count them must not count those of
// other test processes running at the same time.
inline std::vector<std::string> ourSegments() {
  std::vector<std::string> names;
  const std::string pid = "-" + std::to_string(::getpid()) + "-";
  if (DIR* dir = ::opendir("/dev/shm")) {
    while (const dirent* e = ::readdir(dir)) {
      const std::string name = e->d_name;
      if (name.rfind("commhost-shm-", 0) == 0 && name.find(pid) != std::string::npos) names.push_back(name);
    }
    ::closedir(dir);
  }
  return names;
}

// Runs fn(rank) on `world` threads and rethrows the first failure.
inline void runRanks(int world, const std::function<void(int)>& fn) {
  std::vector<std::exception_ptr> errors(world);
  std::vector<std::thread> threads;
  threads.reserve(world);
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

// `world` groups over one HashStore, created concurrently (creation is collective).
inline std::vector<std::shared_ptr<ProcessGroup>> makeGroups(const std::string& yaml, int world) {
  auto registry = testRegistry();
  auto config = configFrom(yaml, *registry);
  auto store = std::make_shared<HashStore>(std::chrono::seconds(20));
  std::vector<std::shared_ptr<ProcessGroup>> groups(world);
  runRanks(world, [&](int r) { groups[r] = ProcessGroup::create({config, registry, store, r, world}); });
  return groups;
}

// Hot-swap tests (reconfigure, syncPoint): gloo alone, and every op shm serves on shm with
// the rest on the same gloo entry (so a swap between the two keeps gloo).
constexpr const char* kGloo =
    "group: { timeout: 20s }\n"
    "backends: { gloo: { options: { threads: 1, contexts: 1 } } }\n"
    "routes: [{ device: cpu, backend: gloo }]\n";
constexpr const char* kShm =
    "group: { timeout: 20s }\n"
    "backends: { gloo: { options: { threads: 1, contexts: 1 } }, shm: { options: { chunk: 4096 } } }\n"
    "routes: [{ device: cpu, backend: [shm, gloo] }]\n";

// ProcessGroup::shrink's options with its round bounded by `timeout`.
inline ShrinkOptions shrinkWithin(std::chrono::milliseconds timeout) {
  ShrinkOptions o;
  o.timeout = timeout;
  return o;
}

// Rank r contributes r + 1 + iter in every element; the sum is known to every rank.
inline void checkedAllreduce(ProcessGroup& pg, int iter) {
  Tensor t = Tensor::empty({64}, DType::Float32);
  for (int i = 0; i < 64; ++i) t.data_as<float>()[i] = static_cast<float>(pg.rank() + 1 + iter);
  pg.allreduce(t)->wait();
  const float want = pg.size() * (pg.size() + 1) / 2.0f + static_cast<float>(iter * pg.size());
  for (int i = 0; i < 64; ++i)
    ASSERT_EQ(t.data_as<float>()[i], want) << "rank " << pg.rank() << " iter " << iter << " element " << i;
}

constexpr const char* kSelfConfig = "backends: { self: {} }\nroutes: [{ device: cpu, backend: self }]\n";
constexpr const char* kStoreCollConfig =
    "group: { timeout: 20s }\nbackends: { ref: { plugin: storecoll } }\nroutes: [{ device: cpu, backend: ref }]\n";

// Expects `stmt` to throw E with a message containing every fragment.
#define EXPECT_THROW_WITH(stmt, E, ...)                                                                               \
  do {                                                                                                                \
    try {                                                                                                             \
      stmt;                                                                                                           \
      ADD_FAILURE() << "expected " #E " from " #stmt;                                                                 \
    } catch (const E& e) {                                                                                            \
      for (const char* fragment : {__VA_ARGS__})                                                                      \
        EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << "message lacks '" << fragment << "':\n" \
                                                                           << e.what();                               \
    }                                                                                                                 \
  } while (0)

}  // namespace commhost::test
