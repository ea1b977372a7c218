// Helpers shared by the unit tests: configs from text, and ranks as threads.
#pragma once

#include <gtest/gtest.h>

#include <exception>
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

inline std::shared_ptr<const Config> configFrom(const std::string& yaml, PluginRegistry& registry,
                                                const std::vector<std::string>& sets = {}) {
  ConfigOverrides overrides;
  overrides.set = sets;
  overrides.fromEnvironment = false;
  return std::make_shared<Config>(loadConfigText(yaml, "test.yaml", registry, overrides));
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

constexpr const char* kSelfConfig = "backends: { self: {} }\nroutes: [{ device: cpu, backend: self }]\n";
constexpr const char* kStoreCollConfig =
    "group: { timeout: 20s }\nbackends: { ref: { plugin: storecoll } }\nroutes: [{ device: cpu, backend: ref }]\n";

// Expects `stmt` to throw E with a message containing every fragment.
#define EXPECT_THROW_WITH(stmt, E, ...)                                          \
  do {                                                                           \
    try {                                                                        \
      stmt;                                                                      \
      ADD_FAILURE() << "expected " #E " from " #stmt;                            \
    } catch (const E& e) {                                                       \
      for (const char* fragment : {__VA_ARGS__})                                 \
        EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)       \
            << "message lacks '" << fragment << "':\n" << e.what();              \
    }                                                                            \
  } while (0)

}  // namespace commhost::test
