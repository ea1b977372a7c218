// SPDX-License-Identifier: Apache-2.0
// NOLINTBEGIN(concurrency-mt-unsafe): these tests set the environment while no other thread runs
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "test_util.h"

namespace commhost::test {
namespace {

TEST(OptionParsing, DurationsAndSizes) {
  EXPECT_EQ(parseDuration("30s").count(), 30000);
  EXPECT_EQ(parseDuration("100ms").count(), 100);
  EXPECT_EQ(parseDuration("2m").count(), 120000);
  EXPECT_EQ(parseDuration("1.5s").count(), 1500);
  EXPECT_EQ(parseDuration("7").count(), 7000);
  EXPECT_THROW(parseDuration("soon"), InvalidArgument);
  EXPECT_THROW(parseDuration("5 parsecs"), InvalidArgument);
  EXPECT_EQ(parseSize("64MiB"), 64ll << 20);
  EXPECT_EQ(parseSize("1KB"), 1000);
  EXPECT_EQ(parseSize("4096"), 4096);
  EXPECT_EQ(parseSize("2GiB"), 2ll << 30);
  EXPECT_THROW(parseSize("big"), InvalidArgument);
  EXPECT_THROW_WITH(parseSize("99999999999GiB"), InvalidArgument, "too large");
  EXPECT_EQ(parseSize("2TiB"), 2ll << 40);
  EXPECT_THROW_WITH(parseSize("16EiB"), InvalidArgument, "too large a size (max 9223372036854775807 bytes");
  EXPECT_THROW_WITH(parseSize("99999999999TiB"), InvalidArgument, "too large a size");
  EXPECT_THROW_WITH(parseDuration("-5s"), InvalidArgument, "'-5s' is a negative duration");
  EXPECT_THROW_WITH(parseDuration("9999999999999999h"), InvalidArgument, "too long");
  EXPECT_EQ(formatSize(64ll << 20), "64MiB");
  EXPECT_EQ(formatDuration(std::chrono::milliseconds(1500)), "1500ms");
  EXPECT_EQ(closestMatch("timout", {"timeout", "name"}), "timeout");
  EXPECT_EQ(closestMatch("zzzzzz", {"timeout", "name"}), "");
}

TEST(Config, DefaultsFilledIn) {
  auto registry = testRegistry();
  auto cfg = configFrom(kSelfConfig, *registry);
  EXPECT_EQ(cfg->groupName(), "main");
  EXPECT_EQ(cfg->timeout(), std::chrono::seconds(30));
  // No store: the embedded tcp store, as the README and configs/default.yaml say, so a
  // config written for one rank still works for many.
  EXPECT_EQ(cfg->store.plugin, "tcp");
  EXPECT_EQ(cfg->store.options.getString("serve"), "auto");
  EXPECT_EQ(cfg->backends.at("self").plugin, "self");  // plugin defaults to the backend's name
  EXPECT_NE(cfg->effectiveYaml.find("timeout: 30s"), std::string::npos);
}

TEST(Config, EmbeddedDefaultLoads) {
  auto registry = testRegistry();
  ConfigOverrides none;
  none.fromEnvironment = false;
  Config cfg = loadConfigText(defaultConfigText(), "<embedded default>", *registry, none);
  EXPECT_EQ(cfg.routes.size(), 1u);
  EXPECT_EQ(cfg.store.plugin, "tcp");
  EXPECT_EQ(cfg.backends.count("gloo"), 1u);
}

// A job started in a checkout (a test run) must not leave dumps in it: the default dump
// dir is under the temp dir, never relative to the working directory.
TEST(Config, DefaultDumpDirIsUnderTheTempDirNotTheWorkingDirectory) {
  auto registry = testRegistry();
  ConfigOverrides none;
  none.fromEnvironment = false;
  Config cfg = loadConfigText(kSelfConfig, "test.yaml", *registry, none);
  const std::string dir = cfg.host.getString("supervisor.flight_recorder.dump_dir");
  ASSERT_FALSE(dir.empty());
  EXPECT_EQ(dir.front(), '/') << dir;
  EXPECT_NE(dir.find("/commhost-traces-" + std::to_string(::getuid())), std::string::npos) << dir;
  Config chosen = loadConfigText(std::string(kSelfConfig) + "supervisor: { flight_recorder: { dump_dir: d } }\n",
                                 "test.yaml", *registry, none);
  EXPECT_EQ(chosen.host.getString("supervisor.flight_recorder.dump_dir"), "d");
}

TEST(Config, SetOverridesWinAndAreCited) {
  auto registry = testRegistry();
  auto cfg = configFrom(kSelfConfig, *registry, {"group.timeout=5s", "group.name=trainer"});
  EXPECT_EQ(cfg->timeout(), std::chrono::seconds(5));
  EXPECT_EQ(cfg->groupName(), "trainer");
  EXPECT_THROW_WITH(configFrom(kSelfConfig, *registry, {"group.timeout=abc"}), ConfigError, "--set group.timeout=abc",
                    "not a duration");
  EXPECT_THROW_WITH(configFrom(kSelfConfig, *registry, {"noequals"}), ConfigError, "expected key=value");
}

TEST(Config, EnvironmentOverridesBelowSet) {
  auto registry = testRegistry();
  ::setenv("COMMHOST_GROUP_TIMEOUT", "7s", 1);
  ::setenv("COMMHOST_GROUP_TIMOUT", "1s", 1);
  ConfigOverrides overrides;
  Config fromEnv = loadConfigText(kSelfConfig, "test.yaml", *registry, overrides);
  overrides.set = {"group.timeout=9s"};
  Config fromSet = loadConfigText(kSelfConfig, "test.yaml", *registry, overrides);
  ::unsetenv("COMMHOST_GROUP_TIMEOUT");
  ::unsetenv("COMMHOST_GROUP_TIMOUT");
  EXPECT_EQ(fromEnv.timeout(), std::chrono::seconds(7));
  EXPECT_EQ(fromSet.timeout(), std::chrono::seconds(9));
  ASSERT_EQ(fromEnv.warnings.size(), 1u);
  EXPECT_NE(fromEnv.warnings[0].find("did you mean COMMHOST_GROUP_TIMEOUT"), std::string::npos) << fromEnv.warnings[0];
}

TEST(Config, HashIsStableAndSensitive) {
  auto registry = testRegistry();
  auto a = configFrom(kSelfConfig, *registry);
  auto b = configFrom(std::string("# a comment\n") + kSelfConfig, *registry);
  auto c = configFrom(kSelfConfig, *registry, {"group.timeout=31s"});
  EXPECT_EQ(a->hash, b->hash);  // formatting does not matter, content does
  EXPECT_NE(a->hash, c->hash);
}

// Ranks compare hashes at start: what is per host (the dump directory, by default under
// each host's own TMPDIR) must not make equal configs differ.
TEST(Config, HashLeavesOutTheDumpDirectoryAndItsTmpdirDefault) {
  auto registry = testRegistry();
  const char* saved = ::getenv("TMPDIR");
  const std::string before = saved ? saved : "";
  ::setenv("TMPDIR", "/tmp/host-a", 1);
  auto a = configFrom(kSelfConfig, *registry, {"supervisor.flight_recorder.dump_dir=\"\""});
  ::setenv("TMPDIR", "/var/tmp/host-b", 1);
  auto b = configFrom(kSelfConfig, *registry, {"supervisor.flight_recorder.dump_dir=\"\""});
  if (saved) ::setenv("TMPDIR", before.c_str(), 1);
  else ::unsetenv("TMPDIR");
  EXPECT_EQ(a->host.getString("supervisor.flight_recorder.dump_dir"),
            "/tmp/host-a/commhost-traces-" + std::to_string(::getuid()));
  EXPECT_EQ(b->host.getString("supervisor.flight_recorder.dump_dir"),
            "/var/tmp/host-b/commhost-traces-" + std::to_string(::getuid()));
  EXPECT_EQ(a->hash, b->hash);
  auto c = configFrom(kSelfConfig, *registry, {"supervisor.flight_recorder.dump_dir=/scratch/node7"});
  EXPECT_EQ(a->hash, c->hash);
  // The effective config still shows this rank's own directory.
  EXPECT_NE(c->effectiveYaml.find("/scratch/node7"), std::string::npos);
}

TEST(Config, PluginOptionsValidatedWithDefaults) {
  auto registry = testRegistry();
  auto cfg = configFrom(
      "backends:\n  o:\n    plugin: optioned\n    options: { threads: 8, segment: 4MiB, tuning: { chunk: 1KiB },"
      " hosts: [a, b] }\nroutes: [{ device: cpu, backend: o }]\n",
      *registry);
  const OptionValues& o = cfg->backends.at("o").options;
  EXPECT_EQ(o.getInt("threads"), 8);
  EXPECT_EQ(o.getInt("segment"), 4 << 20);
  EXPECT_EQ(o.getInt("tuning.chunk"), 1024);
  EXPECT_EQ(o.getString("algorithm"), "ring");
  EXPECT_EQ(o.getDuration("timeout"), std::chrono::seconds(5));
  EXPECT_FALSE(o.getBool("verbose"));
  EXPECT_DOUBLE_EQ(o.getDouble("ratio"), 0.5);
  EXPECT_EQ(o.getList("hosts"), (std::vector<std::string>{"a", "b"}));
  EXPECT_THROW(o.getBool("threads"), InvalidArgument);
  EXPECT_THROW(o.getInt("nope"), InvalidArgument);
}

TEST(Config, PluginOptionErrorsCarryPlaceAndHint) {
  auto registry = testRegistry();
  const std::string yaml =
      "backends:\n"
      "  o:\n"
      "    plugin: optioned\n"
      "    options:\n"
      "      thread: 2\n"
      "      algorithm: rign\n"
      "      threads: 100\n"
      "routes: [{ device: cpu, backend: o }]\n";
  EXPECT_THROW_WITH(configFrom(yaml, *registry), ConfigError, "test.yaml:5:7", "did you mean 'threads'",
                    "test.yaml:6:18", "did you mean 'ring'", "test.yaml:7:16", "out of range", "3 errors");
}

// Issue 42.1: a gloo device that is neither an interface nor an address of this host is
// refused where the config is loaded (config check, commhost run, each rank), through the
// plugin's checkOptions, not first met by Gloo inside a backend or a swap.
TEST(Config, APluginsOwnOptionCheckRefusesWhatItsSpecsCannot) {
  auto registry = testRegistry();
  const std::string yaml =
      "backends:\n"
      "  gloo:\n"
      "    options:\n"
      "      device: chadv_nodev0\n"
      "routes: [{ device: cpu, backend: gloo }]\n";
  EXPECT_THROW_WITH(
      configFrom(yaml, *registry), ConfigError, "test.yaml:4:7: 'backends.gloo.options': device 'chadv_nodev0'",
      "device 'chadv_nodev0' is neither a network interface of this host", "Set it to an interface (ip -br link)");
  // Loopback by name, an interface and an address of this host pass.
  for (const char* device : {"lo", "127.0.0.1", "localhost"})
    EXPECT_NO_THROW(configFrom(std::string("backends: { gloo: { options: { device: ") + device +
                                   " } } }\nroutes: [{ device: cpu, backend: gloo }]\n",
                               *registry))
        << device;
  // An address that is not this host's resolves but cannot be bound.
  EXPECT_THROW_WITH(configFrom("backends: { gloo: { options: { device: 192.0.2.7 } } }\n"
                               "routes: [{ device: cpu, backend: gloo }]\n",
                               *registry),
                    ConfigError, "resolves to 192.0.2.7, none of them an address of this host");
}

TEST(Config, TokensAreRedactedInTheEffectiveConfig) {
  auto registry = testRegistry();
  auto cfg = configFrom(std::string("store: { plugin: tcp, options: { auth_token: s3cret } }\n") + kSelfConfig,
                        *registry);
  EXPECT_EQ(cfg->store.options.getString("auth_token"), "s3cret");
  EXPECT_EQ(cfg->effectiveYaml.find("s3cret"), std::string::npos) << cfg->effectiveYaml;
  EXPECT_NE(cfg->effectiveYaml.find("<redacted>"), std::string::npos);
}

TEST(Config, StoreShorthandAndKindMismatch) {
  auto registry = testRegistry();
  auto cfg = configFrom(std::string("store: hash\n") + kSelfConfig, *registry);
  EXPECT_EQ(cfg->store.plugin, "hash");
  EXPECT_THROW_WITH(configFrom(std::string("store: self\n") + kSelfConfig, *registry), ConfigError,
                    "'self' is a backend plugin, not a store plugin");
}

TEST(Config, UnavailablePluginLoadsWithWarning) {
  auto registry = testRegistry();
  auto cfg = configFrom(
      "backends: { self: {}, gpu: { plugin: probed } }\n"
      "routes: [{ device: cpu, backend: self }, { device: cuda, backend: gpu }]\n",
      *registry);
  ASSERT_EQ(cfg->warnings.size(), 1u);
  EXPECT_NE(cfg->warnings[0].find("no CUDA device"), std::string::npos);
}

TEST(Config, HashStoreRefusesSeveralProcesses) {
  // Threads-as-ranks tests hand ProcessGroup::create one HashStore; a job whose ranks are
  // processes gets its store from the plugin, which refuses world size > 1 with the fix.
  auto registry = testRegistry();
  const PluginDescriptor* hash = registry->require("hash", PluginKind::Store).descriptor;
  StoreContext ctx;
  ctx.worldSize = 2;
  ctx.timeout = std::chrono::seconds(1);
  EXPECT_THROW_WITH(hash->createStore(OptionValues(), ctx), ConfigError, "lives inside one process",
                    "store: { plugin: tcp }");
  ctx.worldSize = 1;
  EXPECT_NE(hash->createStore(OptionValues(), ctx), nullptr);
}

TEST(Config, TokensNeverPrinted) {
  auto registry = testRegistry();
  const std::string secret = "s3cret-77af";
  // From --set: the effective config shows <redacted>.
  auto cfg = configFrom(std::string("store: { plugin: tcp }\n") + kSelfConfig, *registry,
                        {"store.options.auth_token=" + secret});
  EXPECT_EQ(cfg->store.options.getString("auth_token"), secret);
  EXPECT_EQ(cfg->effectiveYaml.find(secret), std::string::npos) << cfg->effectiveYaml;
  EXPECT_NE(cfg->effectiveYaml.find("auth_token: <redacted>"), std::string::npos) << cfg->effectiveYaml;
  // An error under a --set quotes the assignment with the value hidden.
  try {
    configFrom(std::string("store: { plugin: hash }\n") + kSelfConfig, *registry,
               {"store.options.auth_token=" + secret});
    ADD_FAILURE() << "a hash store took an auth_token";
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find(secret), std::string::npos) << message;
    EXPECT_NE(message.find("--set store.options.auth_token=<redacted>"), std::string::npos) << message;
  }
  // Options cannot be set under the `store: tcp` shorthand: the error says how to fix it.
  EXPECT_THROW_WITH(
      configFrom(std::string("store: tcp\n") + kSelfConfig, *registry, {"store.options.auth_token=" + secret}),
      ConfigError, "--set store.options.auth_token=<redacted>: 'store' is not a map but the plain value 'tcp'",
      "e.g. store: { plugin: tcp }");
  // From COMMHOST_STORE_TOKEN: the same.
  ::setenv("COMMHOST_STORE_TOKEN", secret.c_str(), 1);
  ConfigOverrides env;
  Config fromEnv = loadConfigText(std::string("store: { plugin: tcp }\n") + kSelfConfig, "test.yaml", *registry, env);
  ::unsetenv("COMMHOST_STORE_TOKEN");
  EXPECT_EQ(fromEnv.store.options.getString("auth_token"), secret);
  EXPECT_EQ(fromEnv.effectiveYaml.find(secret), std::string::npos) << fromEnv.effectiveYaml;
  // A key that only contains a secret word's letters is no secret: its bad value is shown.
  EXPECT_THROW_WITH(
      configFrom(std::string("store: { plugin: tcp }\n") + kSelfConfig, *registry, {"store.options.auth_timeout=5x"}),
      ConfigError, "store.options.auth_timeout=5x");
}

TEST(Config, InvalidUtf8RefusedAndEscaped) {
  auto registry = testRegistry();
  // In the file: refused with its place, the bytes written \xNN.
  try {
    configFrom(std::string("group: { name: \"a\xff\" }\n") + kSelfConfig, *registry);
    ADD_FAILURE() << "a group name that is not UTF-8 was accepted";
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\xff'), std::string::npos) << "raw byte echoed";
    EXPECT_NE(message.find("test.yaml:1:18: not valid UTF-8 (bytes \\xff"), std::string::npos) << message;
  }
  // In a --set: the same, and the origin is escaped too.
  try {
    configFrom(kSelfConfig, *registry, {"group.name=tr\xc3"});
    ADD_FAILURE() << "a --set name that is not UTF-8 was accepted";
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\xc3'), std::string::npos) << "raw byte echoed";
    EXPECT_NE(message.find("--set group.name=tr\\xc3: not valid UTF-8"), std::string::npos) << message;
  }
  // From a COMMHOST_ variable: refused too.
  ::setenv("COMMHOST_GROUP_NAME", "b\xfe", 1);
  ConfigOverrides env;
  try {
    loadConfigText(kSelfConfig, "test.yaml", *registry, env);
    ADD_FAILURE() << "a COMMHOST_GROUP_NAME that is not UTF-8 was accepted";
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\xfe'), std::string::npos) << "raw byte echoed";
    EXPECT_NE(message.find("COMMHOST_GROUP_NAME=b\\xfe: not valid UTF-8"), std::string::npos) << message;
  }
  ::unsetenv("COMMHOST_GROUP_NAME");
  // A control character quoted back in a message is escaped, not sent to the terminal.
  try {
    configFrom(std::string("logging: { level: \"\x1b[31mred\" }\n") + kSelfConfig, *registry);
    ADD_FAILURE() << "a bad log level was accepted";
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\x1b'), std::string::npos) << "raw escape echoed";
    EXPECT_NE(message.find("'\\x1b[31mred' is not one of"), std::string::npos) << message;
  }
  // Valid multi-byte names still load.
  EXPECT_EQ(configFrom(std::string("group: { name: \"tr\xc3\xa4ger\" }\n") + kSelfConfig, *registry)->groupName(),
            "tr\xc3\xa4ger");
}

TEST(Config, ManyProblemsStopAfterTheShownOnes) {
  // 60,000 unknown keys: every one counted, 50 shown, the rest summed up.
  std::string text = kSelfConfig;
  for (int i = 0; i < 60000; ++i) text += "k" + std::to_string(100000 + i) + ": 1\n";
  ASSERT_LT(text.size(), 1u << 20);
  auto registry = testRegistry();
  try {
    configFrom(text, *registry);
    ADD_FAILURE() << "unknown keys were accepted";
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("has 60,000 errors:"), std::string::npos) << message.substr(0, 200);
    EXPECT_NE(message.find("... and 59,950 more"), std::string::npos) << message.substr(message.size() - 200);
    EXPECT_LT(message.size(), 20000u);
  }
  // Past the size cap the file is refused before parsing.
  EXPECT_THROW_WITH(configFrom(std::string(2 << 20, '#'), *registry), ConfigError,
                    "is 2,097,152 bytes; a config may be at most 1,048,576 bytes");
}

TEST(Config, DirectoryGivenAsConfig) {
  auto registry = testRegistry();
  ConfigOverrides none;
  none.fromEnvironment = false;
  EXPECT_THROW_WITH(loadConfigFile(COMMHOST_TEST_CONFIG_DIR, *registry, none), ConfigError, "is a directory",
                    "give a YAML file");
}

TEST(Config, RangesInTheKeysUnit) {
  auto registry = testRegistry();
  // group.timeout's minimum is 1 ms: "[0, 604800]" said neither the bound nor the unit.
  EXPECT_THROW_WITH(configFrom(kSelfConfig, *registry, {"group.timeout=0s"}), ConfigError,
                    "'group.timeout': '0s' is out of range; allowed: 1ms to 168h");
  EXPECT_THROW_WITH(configFrom(kSelfConfig, *registry, {"supervisor.flight_recorder.entries=-1"}), ConfigError,
                    "'-1' is out of range; allowed: 0 to 1048576");
  EXPECT_THROW_WITH(configFrom(kSelfConfig, *registry, {"group.timeout=soon"}), ConfigError,
                    "'soon' is not a duration; write e.g. 30s, 100ms, 2m or 1h (allowed: 1ms to 168h)");
}

// Sets a variable for one scope; unset again even when an assertion fails.
struct ScopedEnv {
  std::string name;
  ScopedEnv(std::string n, const std::string& value) : name(std::move(n)) { ::setenv(name.c_str(), value.c_str(), 1); }
  ~ScopedEnv() { ::unsetenv(name.c_str()); }
};

// A folder of this test's own holding `file` (a config) and plugins/, a link to the test
// plugins in good/: a config shipped beside its plugins.
std::string jobFolder(const std::string& file, const std::string& yaml) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(testDumpDir()) / "job";
  fs::create_directories(dir);
  std::error_code ignored;
  fs::create_directory_symlink(pluginDir("good"), dir / "plugins", ignored);
  std::ofstream(dir / file) << yaml;
  return dir.string();
}

TEST(Config, RelativePluginPathIsRelativeToTheConfigFolder) {
  const std::string dir = jobFolder(
      "job.yaml",
      "plugin_path: [plugins]\nbackends: { o: { plugin: optioned } }\nroutes: [{ device: cpu, backend: o }]\n");
  ASSERT_NE(std::filesystem::current_path(), dir);  // the working directory is not the config's folder
  PluginRegistry registry;                          // no test plugins but what the config's plugin_path finds
  ConfigOverrides none;
  none.fromEnvironment = false;
  Config cfg = loadConfigFile(dir + "/job.yaml", registry, none);
  EXPECT_EQ(cfg.backends.at("o").plugin, "optioned");
  EXPECT_TRUE(cfg.warnings.empty()) << cfg.warnings.front();
  // Tools that only search plugins read the same folders.
  std::vector<std::string> warnings;
  EXPECT_EQ(configPluginPath(dir + "/job.yaml", warnings), std::vector<std::string>{dir + "/plugins"});
  EXPECT_TRUE(warnings.empty());
}

TEST(Config, MissingPluginFolderIsAWarningWithItsPlace) {
  const std::string dir = jobFolder("missing.yaml",
                                    "plugin_path:\n  - plugins\n  - nowhere\nbackends: { o: { plugin: optioned } }\n"
                                    "routes: [{ device: cpu, backend: o }]\n");
  PluginRegistry registry;
  ConfigOverrides none;
  none.fromEnvironment = false;
  Config cfg = loadConfigFile(dir + "/missing.yaml", registry, none);
  ASSERT_EQ(cfg.warnings.size(), 1u);
  EXPECT_EQ(cfg.warnings[0], dir + "/missing.yaml:3:5: plugin_path folder " + dir +
                                 "/nowhere ('nowhere' relative to the config's folder) does not exist; no plugins are "
                                 "loaded from it. Fix or remove the entry");
  std::vector<std::string> warnings;
  configPluginPath(dir + "/missing.yaml", warnings);
  EXPECT_EQ(warnings, cfg.warnings);
  // In text with no file, an absolute folder: named as given, with its place.
  auto registry2 = testRegistry();
  auto text = configFrom(std::string("plugin_path: [/nonexistent/commhost-plugins]\n") + kSelfConfig, *registry2);
  ASSERT_EQ(text->warnings.size(), 1u);
  EXPECT_NE(text->warnings[0].find("test.yaml:1:15: plugin_path folder /nonexistent/commhost-plugins does not exist"),
            std::string::npos)
      << text->warnings[0];
}

TEST(Config, PluginNotFoundNamesEveryFolderSearched) {
  auto registry = testRegistry();
  const std::string searched = "searched: " + pluginDir("good") + ", ";
  EXPECT_THROW_WITH(configFrom("plugin_path: [/nonexistent/commhost-plugins]\nbackends: { x: { plugin: nosuch } }\n"
                               "routes: [{ device: cpu, backend: x }]\n",
                               *registry),
                    ConfigError, "backend plugin 'nosuch' not found", searched.c_str(),
                    "/nonexistent/commhost-plugins (missing)", "commhost/plugins");
}

TEST(Config, PluginOptionsFromTheEnvironment) {
  auto registry = testRegistry();
  const std::string yaml = "backends: { my-o: { plugin: optioned } }\nroutes: [{ device: cpu, backend: my-o }]\n";
  ConfigOverrides env;
  {
    // A backend's name: upper-cased, other characters '_'. The store's options too.
    ScopedEnv threads("COMMHOST_BACKENDS_MY_O_OPTIONS_THREADS", "8");
    ScopedEnv chunk("COMMHOST_BACKENDS_MY_O_OPTIONS_TUNING_CHUNK", "2KiB");
    ScopedEnv linger("COMMHOST_STORE_OPTIONS_LINGER", "3s");
    Config cfg = loadConfigText(yaml, "test.yaml", *registry, env);
    EXPECT_EQ(cfg.backends.at("my-o").options.getInt("threads"), 8);
    EXPECT_EQ(cfg.backends.at("my-o").options.getInt("tuning.chunk"), 2048);
    EXPECT_EQ(cfg.store.options.getDuration("linger"), std::chrono::seconds(3));
    EXPECT_TRUE(cfg.warnings.empty()) << cfg.warnings.front();
    // --set wins over the environment, as for host keys.
    ConfigOverrides set;
    set.set = {"backends.my-o.options.threads=4"};
    EXPECT_EQ(loadConfigText(yaml, "test.yaml", *registry, set).backends.at("my-o").options.getInt("threads"), 4);
  }
  {
    // A bad value cites the variable as a bad --set cites itself.
    ScopedEnv threads("COMMHOST_BACKENDS_MY_O_OPTIONS_THREADS", "abc");
    EXPECT_THROW_WITH(loadConfigText(yaml, "test.yaml", *registry, env), ConfigError,
                      "COMMHOST_BACKENDS_MY_O_OPTIONS_THREADS=abc: 'backends.my-o.options.threads': 'abc' is not an "
                      "integer");
    // Two backends whose names map to one variable: refused, naming both keys.
    EXPECT_THROW_WITH(loadConfigText("backends: { my-o: { plugin: optioned }, my_o: { plugin: optioned } }\n"
                                     "routes: [{ device: cpu, backend: my-o }]\n",
                                     "test.yaml", *registry, env),
                      ConfigError, "COMMHOST_BACKENDS_MY_O_OPTIONS_THREADS=abc: ambiguous: it would set",
                      "backends.my-o.options.threads", "backends.my_o.options.threads", "use --set");
  }
  {
    // A hook's options: COMMHOST_HOOKS_<NAME>_OPTIONS_<KEY>.
    ScopedEnv factor("COMMHOST_HOOKS_FP16_COMPRESS_OPTIONS_FACTOR", "0.25");
    registry->scan({pluginDir("hook")});
    Config cfg = loadConfigText(yaml + "hooks: { fp16-compress: { plugin: optionedhook } }\n", "test.yaml", *registry,
                                env);
    EXPECT_DOUBLE_EQ(cfg.hooks.at("fp16-compress").options.getDouble("factor"), 0.25);
  }
  {
    // A variable that sets nothing still warns, with the nearest one.
    ScopedEnv typo("COMMHOST_BACKENDS_MY_O_OPTIONS_THREAD", "2");
    Config cfg = loadConfigText(yaml, "test.yaml", *registry, env);
    ASSERT_EQ(cfg.warnings.size(), 1u);
    EXPECT_NE(cfg.warnings[0].find("COMMHOST_BACKENDS_MY_O_OPTIONS_THREAD names no option of a loaded plugin and is "
                                   "ignored (did you mean COMMHOST_BACKENDS_MY_O_OPTIONS_THREADS?); check the entry's "
                                   "name and option, and that its plugin loaded"),
              std::string::npos)
        << cfg.warnings[0];
  }
  {
    // Not shaped like a plugin option: not a setting at all.
    ScopedEnv typo("COMMHOST_GROUP_TIMEOUTS", "2s");
    Config cfg = loadConfigText(yaml, "test.yaml", *registry, env);
    ASSERT_EQ(cfg.warnings.size(), 1u);
    EXPECT_NE(cfg.warnings[0].find("COMMHOST_GROUP_TIMEOUTS is not a commhost setting and is ignored (did you mean "
                                   "COMMHOST_GROUP_TIMEOUT?)"),
              std::string::npos)
        << cfg.warnings[0];
  }
}

TEST(ConfigKeys, EveryHostKeyDescribedFromTheSchema) {
  const std::string text = describeOptions(configSchema(), "");
  for (const auto& spec : configSchema()) {
    EXPECT_NE(text.find("  " + std::string(spec.key) + " ("), std::string::npos) << spec.key;
    EXPECT_NE(text.find(spec.description), std::string::npos) << spec.key;
  }
  EXPECT_NE(text.find("  group.timeout (duration, default: 30s, range: 1ms to 168h)\n"
                      "      Default deadline of each collective (per-op options may override)\n"
                      "      env: COMMHOST_GROUP_TIMEOUT\n"),
            std::string::npos)
      << text;
  // COMMHOST_PLUGIN_PATH is its own variable (searched after plugin_path), not an override.
  EXPECT_EQ(text.find("env: COMMHOST_PLUGIN_PATH"), std::string::npos);
  // Plugin options: the range in the option's unit, no variables unless asked.
  auto registry = testRegistry();
  const std::string optioned = describeOptions(registry->require("optioned", PluginKind::Backend).descriptor->options);
  EXPECT_NE(optioned.find("  threads (int, default: 2, range: 1 to 64)\n"), std::string::npos) << optioned;
  EXPECT_EQ(optioned.find("env:"), std::string::npos);
}

TEST(Config, RouteBackendListDTypeAndReduceOp) {
  auto registry = testRegistry();
  auto cfg = configFrom(
      "backends: { partial: {}, self: {} }\n"
      "routes:\n"
      "  - { device: cpu, backend: [partial, self] }\n"
      "  - { op: allreduce, dtype: float64, reduce_op: max, backend: self }\n",
      *registry);
  ASSERT_EQ(cfg->routes.size(), 2u);
  EXPECT_EQ(cfg->routes[0].backend, "partial");
  EXPECT_EQ(cfg->routes[0].fallback, (std::vector<std::string>{"self"}));
  EXPECT_EQ(cfg->routes[0].backends(), (std::vector<std::string>{"partial", "self"}));
  EXPECT_EQ(cfg->routes[1].dtype, DType::Float64);
  EXPECT_EQ(cfg->routes[1].reduceOp, ReduceOp::Max);
  EXPECT_TRUE(cfg->routes[1].fallback.empty());
  // The effective config writes a list as a list and one backend as before.
  EXPECT_NE(cfg->effectiveYaml.find("backend: [partial, self]"), std::string::npos) << cfg->effectiveYaml;
  EXPECT_NE(cfg->effectiveYaml.find("dtype: f64"), std::string::npos) << cfg->effectiveYaml;
  EXPECT_NE(cfg->effectiveYaml.find("reduce_op: max"), std::string::npos) << cfg->effectiveYaml;
  EXPECT_NE(cfg->effectiveYaml.find("backend: self\n"), std::string::npos) << cfg->effectiveYaml;
}

TEST(Config, RouteKeyErrorsCarryPlace) {
  auto registry = testRegistry();
  const std::string yaml =
      "backends: { self: {} }\n"
      "routes:\n"
      "  - { device: cpu, backend: self }\n"
      "  - { op: allreduce, dtype: f33, backend: self }\n"
      "  - { op: allreduce, reduce_op: maximum, backend: self }\n"
      "  - { op: broadcast, backend: [self, gloo] }\n"
      "  - { op: gather, backend: [] }\n";
  EXPECT_THROW_WITH(configFrom(yaml, *registry), ConfigError, "test.yaml:4:29", "f33", "test.yaml:5:33", "maximum",
                    "test.yaml:6:31", "route to unknown backend 'gloo'", "test.yaml:7:28", "an empty list");
}

}  // namespace
}  // namespace commhost::test
// NOLINTEND(concurrency-mt-unsafe)
