// SPDX-License-Identifier: Apache-2.0
// NOLINTBEGIN(concurrency-mt-unsafe): these tests set the environment while no other thread runs
// The plugin boundary: the build fingerprint the loader compares, the struct prefixes,
// the contexts the host fills for every call, errors that carry their context, and the
// capability features the host checks.
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "test_util.h"

namespace commhost::test {
namespace {

const std::string kOldAbiPlugin = pluginDir("bad") + "/libcommhost_oldstringabi.so";

// The scanned entry of the file at `path`; null when there is none.
const PluginEntry* entryAt(const PluginRegistry& registry, const std::string& path) {
  for (const auto& entry : registry.entries())
    if (entry.path == path) return &entry;
  return nullptr;
}

TEST(BuildFingerprint, PluginWithTheOtherStringAbiIsRefusedNamingBothBuilds) {
  PluginRegistry registry;
  // Both fingerprints, the difference that matters, the file and what to do.
  const std::string commhostBuild = std::string("commhost ") + COMMHOST_VERSION + ": libstdc++";
  EXPECT_THROW_WITH(registry.loadFile(kOldAbiPlugin), PluginError, kOldAbiPlugin.c_str(),
                    "does not match this commhost's", "_GLIBCXX_USE_CXX11_ABI: 0 in the plugin, 1 in commhost",
                    "std::string: 8/8 bytes/alignment in the plugin, 32/8 in commhost",
                    "BackendContext: ", "Plugin: libstdc++", "(_GLIBCXX_USE_CXX11_ABI=0)", commhostBuild.c_str(),
                    "(_GLIBCXX_USE_CXX11_ABI=1)",
                    "Rebuild the plugin with the toolchain and flags commhost was built with");
  EXPECT_EQ(registry.find("oldstringabi"), nullptr);

  // A scan records it as unusable, with the plugin's fingerprint kept for `inspect`.
  registry.scan({pluginDir("bad")});
  const PluginEntry* e = entryAt(registry, kOldAbiPlugin);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->descriptor, nullptr);
  EXPECT_EQ(e->build.cxx11Abi, 0);
  EXPECT_EQ(kBuildFingerprint.cxx11Abi, 1);
}

TEST(BuildFingerprint, ComparesLayoutsAndTheDualAbiButNotTheCompiler) {
  EXPECT_EQ(abiDifferences(kBuildFingerprint, kBuildFingerprint, COMMHOST_ABI_MINOR), "");
  // gcc and clang against one libstdc++ are ABI compatible: recorded, not refused.
  BuildFingerprint clang = kBuildFingerprint;
  clang.compiler = CompilerFamily::Clang;
  clang.compilerMajor = 14;
  EXPECT_EQ(abiDifferences(clang, kBuildFingerprint, COMMHOST_ABI_MINOR), "");
  EXPECT_NE(describeToolchain(clang).find("clang 14"), std::string::npos);

  BuildFingerprint libcxx = kBuildFingerprint;
  libcxx.stdlib = StdLib::LibCxx;
  libcxx.cxx11Abi = -1;
  EXPECT_NE(abiDifferences(libcxx, kBuildFingerprint, COMMHOST_ABI_MINOR).find("standard library: libc++"),
            std::string::npos);

  // A commhost struct may be smaller only in a plugin built for an older minor (it lacks
  // appended fields); a standard type may never differ.
  BuildFingerprint smaller = kBuildFingerprint;
  smaller.layouts[static_cast<int>(BoundaryType::BackendContext)].size -= 8;
  EXPECT_NE(abiDifferences(smaller, kBuildFingerprint, COMMHOST_ABI_MINOR).find("BackendContext"), std::string::npos);
  if (COMMHOST_ABI_MINOR > 0) {
    EXPECT_EQ(abiDifferences(smaller, kBuildFingerprint, COMMHOST_ABI_MINOR - 1), "");
  }
  BuildFingerprint vector = kBuildFingerprint;
  vector.layouts[static_cast<int>(BoundaryType::Vector)].size = 48;  // _GLIBCXX_DEBUG's vector, say
  EXPECT_NE(abiDifferences(vector, kBuildFingerprint, 0).find("std::vector: 48/8"), std::string::npos);

  // A plugin built from this minor's headers before CompletedWork and AsyncWork were on
  // record (it allocates CompletedWork at its old size): refused within the minor, while a
  // plugin of an older minor may hold fewer types.
  BuildFingerprint fewer = kBuildFingerprint;
  fewer.size -= 2 * sizeof(TypeLayout);
  EXPECT_EQ(fewer.layoutCount(), kNumBoundaryTypes - 2);
  EXPECT_NE(abiDifferences(fewer, kBuildFingerprint, COMMHOST_ABI_MINOR)
                .find("boundary types on record: " + std::to_string(kNumBoundaryTypes - 2) + " in the plugin, " +
                      std::to_string(kNumBoundaryTypes)),
            std::string::npos);
  if (COMMHOST_ABI_MINOR > 0) {
    EXPECT_EQ(abiDifferences(fewer, kBuildFingerprint, COMMHOST_ABI_MINOR - 1), "");
  }
}

// Built against headers whose Backend has one more virtual function: every layout
// matches, so only the interface hashes tell. Refused before anything in it is called.
TEST(InterfaceHashes, APluginWithAnotherVtableIsRefusedNamingTheInterface) {
  const std::string path = pluginDir("othervtable") + "/libcommhost_othervtable.so";
  PluginRegistry registry;
  EXPECT_THROW_WITH(registry.loadFile(path), PluginError, path.c_str(),
                    "whose interfaces declare other virtual functions than this commhost's: Backend (plugin 0x",
                    "The host would call the wrong functions in it",
                    "Rebuild the plugin against the headers of this commhost");
  registry.scan({pluginDir("othervtable")});
  const PluginEntry* e = entryAt(registry, path);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->descriptor, nullptr);
  EXPECT_EQ(e->unavailable.find("Store ("), std::string::npos) << e->unavailable;  // only Backend differs
  EXPECT_EQ(abiDifferences(e->build, kBuildFingerprint, COMMHOST_ABI_MINOR), "");
}

TEST(InterfaceHashes, DifferencesNameEachInterfaceWithBothHashes) {
  EXPECT_EQ(interfaceDifferences(kInterfaceHashes, kInterfaceHashes), "");
  InterfaceHashes other = kInterfaceHashes;
  other.store ^= 1;
  other.commHook = 0x1234;
  const std::string d = interfaceDifferences(other, kInterfaceHashes);
  EXPECT_EQ(d.find("Backend"), std::string::npos) << d;
  EXPECT_NE(d.find("Store (plugin 0x"), std::string::npos) << d;
  EXPECT_NE(d.find("CommHook (plugin 0x0000000000001234, commhost 0x"), std::string::npos) << d;
}

// The virtual functions of the plugin interfaces are frozen within an ABI major: a plugin
// of an older minor must still find every slot where the host calls it. These are ABI 3's.
// When this fails, an interface's virtual functions changed (a comment or a line break
// does not count): undo that, or bump COMMHOST_ABI_MAJOR (CMakeLists.txt), record the new
// hashes here and say in CHANGELOG what plugin authors must do.
TEST(InterfaceHashes, AreFrozenWithinTheAbiMajor) {
  ASSERT_EQ(COMMHOST_ABI_MAJOR, 3) << "a new ABI major: record its interface hashes below";
  EXPECT_EQ(kInterfaceHashes.backend, 0x609c3a11d0e643feull) << "Backend's virtual functions changed";
  EXPECT_EQ(kInterfaceHashes.store, 0x70491f39cb0579d1ull) << "Store's virtual functions changed";
  EXPECT_EQ(kInterfaceHashes.work, 0x01808091dca7c8c6ull) << "Work's virtual functions changed";
  EXPECT_EQ(kInterfaceHashes.commHook, 0x9ef993e4dea23d5bull) << "CommHook's virtual functions changed";
  EXPECT_EQ(kInterfaceHashes.tuner, 0xac305b0f6c79c91cull) << "Tuner's virtual functions changed (since 3.1)";
}

// A minor only appends: a plugin laid out as 3.0 built it (a shorter descriptor, 29
// boundary types on record and four interface hashes after them, at another offset than
// 3.1's) loads, is usable and serves a collective.
TEST(AbiMinor, APluginBuiltForTheOlderMinorLoadsAndServes) {
  PluginRegistry registry;
  const PluginEntry& e = registry.loadFile(pluginDir("abi30") + "/libcommhost_abi30.so");
  ASSERT_TRUE(e.usable()) << e.unavailable;
  EXPECT_EQ(abiMinorOf(e.descriptor->abiVersion), 0u);
  EXPECT_LT(e.descriptor->size, sizeof(PluginDescriptor));
  EXPECT_FALSE(hasTunerFactory(*e.descriptor)) << "createTuner lies past a 3.0 descriptor's end";
  EXPECT_EQ(e.build.layoutCount(), 29);
  const auto config = std::make_shared<const Config>(loadConfigText("plugin_path: [" + pluginDir("abi30") +
                                                                        "]\nbackends: { old: { plugin: abi30 } }\n"
                                                                        "routes: [{ device: cpu, backend: old }]\n",
                                                                    "abi30.yaml", registry));
  auto shared = std::make_shared<PluginRegistry>(registry);
  auto pg = ProcessGroup::create({config, shared, std::make_shared<HashStore>(), 0, 1});
  Tensor t = Tensor::empty({4}, DType::Float32);
  for (int i = 0; i < 4; ++i) t.data_as<float>()[i] = 2.5f;
  pg->allreduce(t)->wait();
  EXPECT_EQ(t.data_as<float>()[3], 2.5f);
}

TEST(StructPrefix, EveryStructThatCrossesStartsWithSizeMagicAndVersion) {
  const BackendContext b;
  const StoreContext s;
  const CommHookContext h;
  const OpContext o;
  EXPECT_EQ(b.size, sizeof(BackendContext));
  EXPECT_EQ(b.magic, kBackendContextMagic);
  EXPECT_EQ(s.size, sizeof(StoreContext));
  EXPECT_EQ(s.magic, kStoreContextMagic);
  EXPECT_EQ(h.size, sizeof(CommHookContext));
  EXPECT_EQ(h.magic, kCommHookContextMagic);
  EXPECT_EQ(o.size, sizeof(OpContext));
  EXPECT_EQ(o.magic, kOpContextMagic);
  EXPECT_EQ(abiMajorOf(o.abiVersion), 3u);
  const TunerContext tc;
  EXPECT_EQ(tc.size, sizeof(TunerContext));
  EXPECT_EQ(tc.magic, kTunerContextMagic);
  EXPECT_EQ(offsetof(TunerContext, abiVersion), 8u);
  const TuneQuery tq;
  EXPECT_EQ(tq.size, sizeof(TuneQuery));
  EXPECT_EQ(tq.magic, kTuneQueryMagic);
  EXPECT_EQ(offsetof(TuneQuery, abiVersion), 8u);
  EXPECT_TRUE(mayGrowInMinor(BoundaryType::TuneQuery));
  EXPECT_FALSE(mayGrowInMinor(BoundaryType::TuneCandidate)) << "held by value in a vector on both sides";
  const SplitRequest r;
  EXPECT_EQ(r.size, sizeof(SplitRequest));
  EXPECT_EQ(r.magic, kSplitRequestMagic);
  EXPECT_EQ(r.abiVersion, kAbiVersion);
  EXPECT_EQ(offsetof(SplitRequest, abiVersion), 8u);
  // Fingerprinted, and allowed to grow in a minor (the host fills it, a plugin reads it).
  EXPECT_EQ(kBuildFingerprint.layouts[static_cast<int>(BoundaryType::SplitRequest)].size, sizeof(SplitRequest));
  EXPECT_STREQ(boundaryTypeName(BoundaryType::SplitRequest), "SplitRequest");
  EXPECT_TRUE(mayGrowInMinor(BoundaryType::SplitRequest));
  // The prefix sits first, where every later minor will find it.
  EXPECT_EQ(offsetof(PluginDescriptor, size), 0u);
  EXPECT_EQ(offsetof(OpContext, abiVersion), 8u);

  // A loaded plugin's descriptor carries the prefix its build filled in.
  auto registry = testRegistry();
  const PluginDescriptor* self = registry->require("self", PluginKind::Backend).descriptor;
  EXPECT_EQ(self->size, sizeof(PluginDescriptor));
  EXPECT_EQ(self->magic, kPluginDescriptorMagic);
  EXPECT_EQ(self->abiVersion, kAbiVersion);
}

// The host fills OpContext.group and .rank, so errors a backend builds from it name
// them: an aborted shm backend's error lost "[group main rank 0]" before.
TEST(OpContextFilled, ShmErrorsNameGroupAndRank) {
  const std::string yaml =
      "group: { timeout: 20s }\n"
      "backends: { ref: { plugin: storecoll }, shm: { options: { inline_max: 1GiB } } }\n"
      "routes: [{ device: cpu, backend: ref }, { device: cpu, op: allreduce, backend: shm }]\n";
  auto groups = makeGroups(yaml, 2);
  groups[0]->backend("shm").abort("test abort");
  Tensor t = Tensor::empty({4}, DType::Float32);
  try {
    groups[0]->allreduce(t)->wait();
    ADD_FAILURE() << "an aborted shm backend ran an allreduce";
  } catch (const AbortedError& e) {
    EXPECT_NE(std::string(e.what()).find("[group main rank 0] allreduce seq 1: the shm backend was aborted"),
              std::string::npos)
        << e.what();
    EXPECT_EQ(e.where().group, "main");
    EXPECT_EQ(e.where().rank, 0);
    EXPECT_EQ(e.where().seq, 1u);
  }
}

TEST(ErrorCarriesContext, RaiseSetsWhereAndItSurvivesAWork) {
  ErrorContext where;
  where.group = "g";
  where.rank = 1;
  where.op = "recv";
  where.seq = 4;
  where.peer = 3;
  try {
    raise(ErrorCode::PeerLost, where, "peer 3 lost", "check its log");
  } catch (const PeerLostError& e) {
    EXPECT_EQ(e.where().peer, 3);
    EXPECT_EQ(e.where().group, "g");
    EXPECT_STREQ(e.where().op, "recv");
    EXPECT_EQ(std::string(e.what()), "[group g rank 1] recv seq 4 (peer 3): peer 3 lost. check its log");
  }
  // Set on a Work as an exception_ptr and rethrown by wait(): the same object.
  OpContext ctx;
  ctx.op = OpType::Recv;
  ctx.seq = 4;
  ctx.timeout = std::chrono::seconds(5);
  auto work = std::make_shared<AsyncWork>(ctx);
  try {
    raise(ErrorCode::PeerLost, where, "peer 3 lost");
  } catch (...) {
    work->fail(std::current_exception());
  }
  try {
    work->wait();
    ADD_FAILURE() << "the work did not fail";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::PeerLost);
    EXPECT_EQ(e.where().peer, 3);
  }
  // An error built from a message alone has an empty context, not a crash.
  EXPECT_EQ(PluginError("x").where().peer, -1);
  EXPECT_EQ(ErrorContext::of(ctx, 2).format(), "recv seq 4 (peer 2): ");
}

TEST(Features, SubgroupOnABackendWithoutSplitIsRefused) {
  auto groups = makeGroups("backends: { ns: { plugin: nosplit } }\nroutes: [{ device: cpu, backend: ns }]\n", 1);
  EXPECT_THROW_WITH(groups[0]->newGroup({0}), ConfigError, "[group main rank 0] new_group",
                    "backend 'ns' (plugin nosplit", "does not declare feature split",
                    "Create no subgroups with this config, or remove that backend");
  EXPECT_THROW_WITH(groups[0]->split(0, 0), ConfigError, "split", "backend 'ns'", "feature split");
  // A backend that declares it still splits.
  auto selfGroups = makeGroups(kSelfConfig, 1);
  EXPECT_NE(selfGroups[0]->newGroup({0}), nullptr);
}

// Only backends some cell resolves to count: listed after self, which serves every cell,
// ns is never called, so the group does not create it and its missing Split is no matter.
TEST(Features, ABackendNoRouteUsesIsNotRequiredNorCreated) {
  auto groups = makeGroups(
      "backends: { self: {}, ns: { plugin: nosplit } }\nroutes: [{ device: cpu, backend: [self, ns] }]\n", 1);
  EXPECT_FALSE(groups[0]->routes().uses(0));  // "ns" sorts first among the backends
  EXPECT_NE(groups[0]->newGroup({0}), nullptr);
  EXPECT_THROW_WITH(groups[0]->backend("ns"), InvalidArgument, "no usable backend named 'ns'");
}

class LaunchFeatures : public ::testing::Test {
 protected:
  void SetUp() override { clear(); }
  void TearDown() override {
    clear();
    if (!configPath.empty()) ::unlink(configPath.c_str());
  }
  static void clear() {
    for (const char* v : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                          "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS"})
      ::unsetenv(v);
  }
  void launch(int world, int local) {
    ::setenv("RANK", "0", 1);
    ::setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
    ::setenv("LOCAL_WORLD_SIZE", std::to_string(local).c_str(), 1);
    ::setenv("MASTER_ADDR", "127.0.0.1", 1);  // rank 0 serves the tcp store on a free port
  }
  std::string write(const std::string& yaml) {
    configPath = ::testing::TempDir() + "launch_features_" + std::to_string(::getpid()) + ".yaml";
    std::ofstream(configPath) << yaml;
    return configPath;
  }
  std::string configPath;
};

TEST_F(LaunchFeatures, SeparateProcessesNeedMultiProcess) {
  launch(2, 2);
  InitOptions options;
  options.configPath = write(std::string(kSelfConfig) +
                             "store: { plugin: tcp, options: { serve: auto, linger: 0s } }\n");
  options.overrides.fromEnvironment = false;
  EXPECT_THROW_WITH(init(options), ConfigError, "[rank 0]", "backend 'self' (plugin self",
                    "does not declare feature multi_process", "its 2 ranks are separate processes",
                    "Route this job's ops to a backend that serves separate processes");
}

TEST_F(LaunchFeatures, RanksOnSeveralHostsNeedMultiHost) {
  launch(4, 2);
  InitOptions options;
  options.configPath = std::string(COMMHOST_TEST_CONFIG_DIR) + "/../../configs/shm.yaml";
  options.overrides.fromEnvironment = false;
  EXPECT_THROW_WITH(init(options), ConfigError, "[rank 0]", "backend 'shm' (plugin shm",
                    "does not declare feature multi_host", "its 4 ranks span hosts (2 on this host",
                    "or run every rank on one host");
}

}  // namespace
}  // namespace commhost::test
// NOLINTEND(concurrency-mt-unsafe)
