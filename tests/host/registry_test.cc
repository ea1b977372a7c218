// SPDX-License-Identifier: Apache-2.0
#include "test_util.h"

namespace commhost::test {
namespace {

const PluginEntry* entryFor(const PluginRegistry& r, const std::string& fileStem) {
  for (const auto& e : r.entries())
    if (e.path.find("libcommhost_" + fileStem + ".so") != std::string::npos) return &e;
  return nullptr;
}

TEST(Registry, FindsBuiltinsAndInstalledSelf) {
  PluginRegistry registry;
  registry.scan(PluginRegistry::searchPath({}));
  const PluginEntry* self = registry.find("self");
  ASSERT_NE(self, nullptr);
  EXPECT_TRUE(self->usable());
  EXPECT_EQ(self->descriptor->kind, PluginKind::Backend);
  EXPECT_TRUE(self->descriptor->capabilities.ops.has(OpType::AlltoallSingle));
  ASSERT_NE(registry.find("hash"), nullptr);
  EXPECT_EQ(registry.find("hash")->path, "<built-in>");
}

TEST(Registry, ScanRecordsEveryBadFileWithItsReason) {
  PluginRegistry registry;
  registry.scan(PluginRegistry::searchPath({pluginDir("bad")}));  // bad/ first: its "self" wins
  const PluginEntry* abi = entryFor(registry, "wrongabi");
  ASSERT_NE(abi, nullptr);
  const std::string future = "built for plugin ABI " + std::to_string(COMMHOST_ABI_MAJOR + 1) + ".0";
  EXPECT_NE(abi->unavailable.find(future), std::string::npos) << abi->unavailable;
  const PluginEntry* nodesc = entryFor(registry, "nodescriptor");
  ASSERT_NE(nodesc, nullptr);
  EXPECT_NE(nodesc->unavailable.find("no commhost plugin descriptor"), std::string::npos);
  const PluginEntry* dep = entryFor(registry, "needsdep");
  ASSERT_NE(dep, nullptr);
  EXPECT_EQ(dep->name, "needsdep");
  EXPECT_NE(dep->unavailable.find("libcommhost_test_dependency.so"), std::string::npos) << dep->unavailable;
  // The real self plugin comes later in the search path, so it is the duplicate.
  const PluginEntry* realSelf = entryFor(registry, "self");
  ASSERT_NE(realSelf, nullptr);
  EXPECT_NE(realSelf->unavailable.find("duplicate"), std::string::npos);
  EXPECT_EQ(registry.find("self")->descriptor->version, std::string("9.9"));
}

TEST(Registry, LoadFileThrowsWithPathAndReason) {
  PluginRegistry registry;
  const std::string abi = pluginDir("bad") + "/libcommhost_wrongabi.so";
  EXPECT_THROW_WITH(registry.loadFile(abi), PluginError, abi.c_str(), "rebuild the plugin");
  // Boost called a missing file a "Bad file descriptor".
  EXPECT_THROW_WITH(registry.loadFile("/nonexistent/libcommhost_x.so"), PluginError,
                    "plugin /nonexistent/libcommhost_x.so does not exist (no such file)");
  registry.loadFile(pluginDir("good") + "/libcommhost_optioned.so");
  EXPECT_NE(registry.find("optioned"), nullptr);
  EXPECT_THROW_WITH(registry.loadFile(pluginDir("good") + "/libcommhost_optioned.so"), PluginError, "already provides");
}

// A plugin referring to a C++ function nothing defines: dlopen's reason with the symbol
// readable, the mangled name kept for nm.
TEST(Registry, UndefinedSymbolIsDemangled) {
  PluginRegistry registry;
  registry.scan({pluginDir("undefined")});
  const PluginEntry* e = entryFor(registry, "undefsym");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->descriptor, nullptr);
  EXPECT_NE(e->unavailable.find("undefined symbol: commhost_test::forgottenHelper(std::"), std::string::npos)
      << e->unavailable;
  EXPECT_NE(e->unavailable.find(" const&, int) (_ZN13commhost_test15forgottenHelper"), std::string::npos)
      << e->unavailable;
  EXPECT_THROW_WITH(registry.loadFile(pluginDir("undefined") + "/libcommhost_undefsym.so"), PluginError,
                    "commhost_test::forgottenHelper(");
}

TEST(Registry, RequireExplains) {
  auto registry = testRegistry();
  const std::string searched = "searched: " + pluginDir("good") + ", ";
  EXPECT_THROW_WITH(registry->require("selff", PluginKind::Backend), PluginError, "not found", "did you mean 'self'",
                    searched.c_str(), "/commhost/plugins");
  EXPECT_THROW_WITH(registry->require("probed", PluginKind::Backend), PluginError, "unavailable",
                    "no CUDA device visible");
  EXPECT_THROW_WITH(registry->require("self", PluginKind::Store), PluginError, "not a store plugin");
}

TEST(Registry, ThrowingFactoryIsReportedAtGroupCreation) {
  auto registry = testRegistry();
  auto config = configFrom("backends: { t: { plugin: throwing } }\nroutes: [{ device: cpu, backend: t }]\n", *registry);
  auto store = std::make_shared<HashStore>();
  EXPECT_THROW_WITH(ProcessGroup::create({config, registry, store, 0, 1}), PluginError, "backend 't'",
                    "libcommhost_throwing.so", "cannot open device /dev/nonexistent");
}

TEST(Registry, SelfRefusesLargerGroups) {
  auto registry = testRegistry();
  auto config = configFrom(kSelfConfig, *registry);
  auto store = std::make_shared<HashStore>(std::chrono::seconds(5));
  EXPECT_THROW_WITH(runRanks(2,
                             [&](int r) {
                               ProcessGroup::create({config, registry, store, r, 2});
                             }),
                    ConfigError, "serves groups of one rank", "has 2 ranks");
}

}  // namespace
}  // namespace commhost::test
