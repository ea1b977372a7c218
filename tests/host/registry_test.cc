// SPDX-License-Identifier: Apache-2.0
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iterator>

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

// Files on the plugin path that no job names are still scanned: each hostile one must end
// up unavailable with its reason, without hanging (a FIFO blocked dlopen forever) or
// crashing the scan (a truncated .so: SIGBUS; a pointer to nothing: SIGSEGV).
TEST(Registry, HostileFilesOnThePluginPathAreReportedNotLoaded) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(testDumpDir()) / "hostile";
  fs::create_directories(dir);
  for (const char* name : {"badpointer", "badname"})
    fs::copy_file(pluginDir("hostile") + "/libcommhost_" + name + ".so",
                  dir / ("libcommhost_" + std::string(name) + ".so"), fs::copy_options::overwrite_existing);
  ASSERT_EQ(::mkfifo((dir / "libcommhost_fifo.so").c_str(), 0600), 0);
  fs::create_symlink("libcommhost_loop.so", dir / "libcommhost_loop.so");
  fs::create_directory(dir / "libcommhost_folder.so");
  std::ofstream(dir / "libcommhost_empty.so").flush();
  // The good optioned plugin cut at every tenth of its length.
  const std::string whole = pluginDir("good") + "/libcommhost_optioned.so";
  const auto size = fs::file_size(whole);
  std::ifstream in(whole, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (int tenth = 1; tenth < 10; ++tenth)
    std::ofstream(dir / ("libcommhost_cut" + std::to_string(tenth) + ".so"), std::ios::binary)
        << bytes.substr(0, size * tenth / 10);

  PluginRegistry registry;
  registry.scan({dir.string()});
  auto reason = [&](const std::string& stem) {
    const PluginEntry* e = entryFor(registry, stem);
    EXPECT_NE(e, nullptr) << stem;
    if (e) {
      EXPECT_EQ(e->descriptor, nullptr) << stem << " was loaded";
    }
    return e ? e->unavailable : std::string();
  };
  EXPECT_EQ(reason("fifo"), "is a FIFO, not a regular file; only regular files are loaded as plugins");
  EXPECT_NE(reason("loop").find("symbolic link that loops"), std::string::npos) << reason("loop");
  EXPECT_NE(reason("folder").find("is a directory"), std::string::npos) << reason("folder");
  EXPECT_NE(reason("empty").find("not an ELF shared object"), std::string::npos) << reason("empty");
  EXPECT_NE(reason("badpointer").find("descriptor pointer that points at no readable memory"), std::string::npos)
      << reason("badpointer");
  EXPECT_NE(reason("badname").find("name points at no readable string"), std::string::npos) << reason("badname");
  for (int tenth = 1; tenth < 10; ++tenth) {
    const std::string why = reason("cut" + std::to_string(tenth));
    EXPECT_TRUE(why.find("truncated") != std::string::npos || why.find("damaged") != std::string::npos)
        << tenth << "/10: " << why;
  }
  // None of them took a name a job could use.
  EXPECT_EQ(registry.find("optioned"), nullptr);
}

// A job opens only what its config names (scanFor): a file on the path that would abort or
// hang the process while loading is listed, never opened. A name that no file is named for
// opens the rest, so a plugin whose file is named otherwise is still found.
TEST(Registry, ScanForOpensOnlyTheNamedPlugins) {
  PluginRegistry registry;
  registry.scanFor(PluginRegistry::searchPath({pluginDir("crashing"), pluginDir("good")}), {"self", "optioned"});
  ASSERT_NE(registry.find("self"), nullptr);
  EXPECT_TRUE(registry.find("self")->usable());
  ASSERT_NE(registry.find("optioned"), nullptr);
  EXPECT_TRUE(registry.find("optioned")->usable());
  EXPECT_EQ(entryFor(registry, "initabort"), nullptr);
  EXPECT_EQ(entryFor(registry, "inithang"), nullptr);
  EXPECT_EQ(entryFor(registry, "throwing"), nullptr);
  EXPECT_EQ(entryFor(registry, "gloo"), nullptr);

  // A later call (a swap's config) opens what it adds, from the folders already listed.
  registry.openFor({"throwing"});
  EXPECT_NE(entryFor(registry, "throwing"), nullptr);
  EXPECT_EQ(entryFor(registry, "gloo"), nullptr);

  // libcommhost_dupself.so declares "self": no file is named for "self" in bad/, so the
  // rest are opened and it is found there; a name nothing declares opens everything too.
  PluginRegistry other;
  other.scanFor({pluginDir("bad")}, {"self"});
  ASSERT_NE(other.find("self"), nullptr);
  EXPECT_EQ(other.find("self")->descriptor->version, std::string("9.9"));
  EXPECT_NE(entryFor(other, "wrongabi"), nullptr);
  PluginRegistry none;
  none.scanFor({pluginDir("bad")}, {"nosuchplugin"});
  EXPECT_NE(entryFor(none, "needsdep"), nullptr);
  EXPECT_EQ(none.find("nosuchplugin"), nullptr);
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

// A plugin built with _GLIBCXX_USE_CXX11_ABI=0 that calls libcommhost with a std::string:
// dlopen refuses it before the build fingerprint can be read; the reason names the ABI.
TEST(Registry, AnOldStringAbiPluginThatCallsCommhostIsNamedAsSuch) {
  PluginRegistry registry;
  registry.scan({pluginDir("oldabicall")});
  const PluginEntry* e = entryFor(registry, "oldabicall");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->descriptor, nullptr);
  EXPECT_NE(e->unavailable.find("was built with _GLIBCXX_USE_CXX11_ABI=0: it calls commhost::raise("),
            std::string::npos)
      << e->unavailable;
  EXPECT_NE(e->unavailable.find("rebuild the plugin without -D_GLIBCXX_USE_CXX11_ABI=0"), std::string::npos)
      << e->unavailable;
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
