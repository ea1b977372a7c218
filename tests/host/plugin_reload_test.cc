// SPDX-License-Identifier: Apache-2.0
// Plugin reload: PluginRegistry::reload and reconfigure(..., reloadPlugins). Two real builds
// of the test plugin `reloadable` (tests/test_plugins: its allreduce adds 0 in build A, 1000
// in build B) are copied over each other in a temp folder; ranks are threads over a HashStore.
#include <dirent.h>

#include <filesystem>

#include "test_util.h"

namespace commhost::test {
namespace {

namespace fs = std::filesystem;

std::string build(const char* variant) { return pluginDir("reload") + "/libcommhost_reloadable_" + variant + ".so"; }

// A folder of the test's own holding libcommhost_reloadable.so.
struct PluginFolder {
  fs::path dir;
  explicit PluginFolder(const std::string& tag) {
    dir = fs::temp_directory_path() / ("commhost-reload-" + std::to_string(::getpid()) + "-" + tag);
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~PluginFolder() {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }
  std::string file() const { return (dir / "libcommhost_reloadable.so").string(); }
  // As an install or a linker does: a new file renamed over the old one (a new inode),
  // never the loaded file rewritten in place.
  void install(const std::string& from) const {
    const fs::path tmp = dir / "incoming.tmp";
    fs::copy_file(from, tmp, fs::copy_options::overwrite_existing);
    fs::rename(tmp, file());
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
    return out;
  }
};

TEST(PluginReload, LoadsTheRebuiltFileUnderTheSameNameAndKeepsTheOldBuildMapped) {
  PluginFolder folder("registry");
  folder.install(build("a"));
  PluginRegistry registry;
  registry.scan({folder.dir.string()});
  const PluginEntry* entry = registry.find("reloadable");
  ASSERT_TRUE(entry && entry->usable()) << (entry ? entry->unavailable : "not found");
  EXPECT_STREQ(entry->descriptor->version, "A");
  const PluginDescriptor* oldDescriptor = entry->descriptor;
  std::shared_ptr<void> oldLibrary = entry->library;
  const size_t count = registry.entries().size();

  EXPECT_FALSE(registry.changedOnDisk("reloadable"));
  EXPECT_FALSE(registry.reload("reloadable"));  // nothing changed: nothing loaded

  folder.install(build("b"));
  EXPECT_TRUE(registry.changedOnDisk("reloadable"));
  EXPECT_TRUE(registry.reload("reloadable"));
  entry = registry.find("reloadable");
  ASSERT_TRUE(entry && entry->usable());
  EXPECT_STREQ(entry->descriptor->version, "B");
  EXPECT_EQ(entry->path, folder.file());
  EXPECT_EQ(entry->reloads, 1u);
  EXPECT_NE(entry->descriptor, oldDescriptor);  // a second mapping, not the first one again
  EXPECT_NE(entry->library, oldLibrary);
  EXPECT_EQ(registry.entries().size(), count);  // replaced, not added
  EXPECT_FALSE(registry.changedOnDisk("reloadable"));
  EXPECT_NE(registry.fileHash("reloadable"), "");
  // The private copy it loaded from is gone; only the plugin file is left.
  EXPECT_EQ(folder.names(), std::vector<std::string>{"libcommhost_reloadable.so"});
  // The old build's descriptor and strings are still mapped.
  EXPECT_STREQ(oldDescriptor->version, "A");
  EXPECT_STREQ(oldDescriptor->name, "reloadable");
}

TEST(PluginReload, AFileThatFailsTheAbiChecksKeepsTheLoadedBuildAndSaysWhy) {
  PluginFolder folder("abi");
  folder.install(build("a"));
  PluginRegistry registry;
  registry.scan({folder.dir.string()});
  folder.install(pluginDir("bad") + "/libcommhost_wrongabi.so");
  const std::string path = folder.file();
  EXPECT_THROW_WITH(registry.reload("reloadable"), PluginError, path.c_str(), "changed on disk",
                    "was built for plugin ABI", "rebuild the plugin against this commhost",
                    "keeps the build loaded before");
  const PluginEntry* entry = registry.find("reloadable");
  ASSERT_TRUE(entry && entry->usable());
  EXPECT_STREQ(entry->descriptor->version, "A");
  EXPECT_EQ(entry->reloads, 0u);
  EXPECT_EQ(folder.names(), std::vector<std::string>{"libcommhost_reloadable.so"});
  EXPECT_THROW_WITH(registry.reload("hash"), PluginError, "built into commhost");
  EXPECT_THROW_WITH(registry.reload("nosuch"), PluginError, "never loaded");
}

// allreduce goes to the reloadable plugin, every other op to storecoll (kept across swaps).
constexpr const char* kConfig =
    "group: { timeout: 20s }\n"
    "backends: { ref: { plugin: storecoll }, r: { plugin: reloadable } }\n"
    "routes: [{ device: cpu, backend: ref }, { device: cpu, op: allreduce, backend: r }]\n";

// Rank r contributes r + 1; the sum plus the build's constant comes back.
float allreduceOnce(ProcessGroup& pg) {
  Tensor t = Tensor::empty({8}, DType::Float32);
  for (int i = 0; i < 8; ++i) t.data_as<float>()[i] = static_cast<float>(pg.rank() + 1);
  pg.allreduce(t)->wait();
  return t.data_as<float>()[7];
}

TEST(PluginReload, ReconfigureRebuildsTheReloadedPluginsBackendOnly) {
  constexpr int kWorld = 3;
  constexpr float kSum = kWorld * (kWorld + 1) / 2.0f;
  PluginFolder folder("swap");
  folder.install(build("a"));
  auto registry = testRegistry();
  registry->scan({folder.dir.string()});
  const PluginDescriptor* descriptorA = registry->find("reloadable")->descriptor;
  auto config = configFrom(kConfig, *registry);
  auto store = std::make_shared<HashStore>(std::chrono::seconds(20));
  std::vector<std::shared_ptr<ProcessGroup>> groups(kWorld);
  runRanks(kWorld, [&](int r) { groups[r] = ProcessGroup::create({config, registry, store, r, kWorld}); });
  runRanks(kWorld, [&](int r) { EXPECT_EQ(allreduceOnce(*groups[r]), kSum); });

  // A work of build A, held across the swap.
  std::vector<Tensor> held(kWorld);
  std::vector<WorkPtr> works(kWorld);
  runRanks(kWorld, [&](int r) {
    held[r] = Tensor::empty({4}, DType::Float32);
    for (int i = 0; i < 4; ++i) held[r].data_as<float>()[i] = 1.0f;
    works[r] = groups[r]->allreduce(held[r]);
  });

  folder.install(build("b"));
  ReconfigureOptions reload;
  reload.reloadPlugins = true;
  std::vector<ReconfigureReport> reports(kWorld);
  runRanks(kWorld, [&](int r) { reports[r] = groups[r]->reconfigure(configFrom(kConfig, *registry), reload); });
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(reports[r].reloaded, std::vector<std::string>{"reloadable"}) << "rank " << r;
    EXPECT_EQ(reports[r].built, std::vector<std::string>{"r"}) << "rank " << r;
    EXPECT_EQ(reports[r].kept, std::vector<std::string>{"ref"}) << "rank " << r;
    EXPECT_STREQ(groups[r]->registry().find("reloadable")->descriptor->version, "B");
  }
  runRanks(kWorld, [&](int r) { EXPECT_EQ(allreduceOnce(*groups[r]), kSum + 1000); });
  // Build A's work still answers after its backend was replaced; then it is released.
  runRanks(kWorld, [&](int r) {
    works[r]->wait();
    EXPECT_EQ(held[r].data_as<float>()[0], static_cast<float>(kWorld));
    works[r].reset();
  });
  // The registry the application holds was not changed under it.
  EXPECT_STREQ(registry->find("reloadable")->descriptor->version, "A");
  EXPECT_EQ(registry->find("reloadable")->descriptor, descriptorA);

  // Nothing changed on disk: nothing reloaded, nothing rebuilt.
  runRanks(kWorld, [&](int r) { reports[r] = groups[r]->reconfigure(configFrom(kConfig, *registry), reload); });
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_TRUE(reports[r].reloaded.empty()) << "rank " << r;
    EXPECT_TRUE(reports[r].built.empty()) << "rank " << r;
    EXPECT_EQ(reports[r].kept, (std::vector<std::string>{"r", "ref"})) << "rank " << r;
  }

  // A rebuilt file that fails the ABI checks: every rank refuses, naming why, and keeps B.
  folder.install(pluginDir("bad") + "/libcommhost_wrongabi.so");
  runRanks(kWorld, [&](int r) {
    EXPECT_THROW_WITH(groups[r]->reconfigure(configFrom(kConfig, *registry), reload), PluginError,
                      "could not be reloaded on rank(s) 0, 1, 2: plugin", "was built for plugin ABI",
                      "keeps the build loaded before", "every rank keeps generation 2");
  });
  for (int r = 0; r < kWorld; ++r) EXPECT_EQ(groups[r]->generation(), 2u);
  runRanks(kWorld, [&](int r) { EXPECT_EQ(allreduceOnce(*groups[r]), kSum + 1000); });
  groups.clear();
  EXPECT_STREQ(descriptorA->version, "A");  // still mapped: build A's code never goes away
}

TEST(PluginReload, RanksWithDifferentBuildsAreNamed) {
  constexpr int kWorld = 2;
  // Each rank its own folder, as on two hosts; only rank 1's file is rebuilt.
  std::vector<std::unique_ptr<PluginFolder>> folders;
  std::vector<std::shared_ptr<PluginRegistry>> registries;
  std::vector<std::shared_ptr<const Config>> configs;
  for (int r = 0; r < kWorld; ++r) {
    folders.push_back(std::make_unique<PluginFolder>("rank" + std::to_string(r)));
    folders[r]->install(build("a"));
    registries.push_back(testRegistry());
    registries[r]->scan({folders[r]->dir.string()});
    configs.push_back(configFrom(kConfig, *registries[r]));
  }
  auto store = std::make_shared<HashStore>(std::chrono::seconds(20));
  std::vector<std::shared_ptr<ProcessGroup>> groups(kWorld);
  runRanks(kWorld, [&](int r) { groups[r] = ProcessGroup::create({configs[r], registries[r], store, r, kWorld}); });
  folders[1]->install(build("b"));
  ReconfigureOptions reload;
  reload.reloadPlugins = true;
  runRanks(kWorld, [&](int r) {
    EXPECT_THROW_WITH(groups[r]->reconfigure(configs[r], reload), PluginError, "different plugin builds", "rank 0 has",
                      "rank 1 has", "reloadable=", "install the same plugin files");
  });
  runRanks(kWorld, [&](int r) { EXPECT_EQ(allreduceOnce(*groups[r]), 3.0f); });  // still build A
}

}  // namespace
}  // namespace commhost::test
