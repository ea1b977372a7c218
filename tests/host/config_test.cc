#include <cstdlib>

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
  EXPECT_EQ(cfg->store.plugin, "hash");
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

TEST(Config, SetOverridesWinAndAreCited) {
  auto registry = testRegistry();
  auto cfg = configFrom(kSelfConfig, *registry, {"group.timeout=5s", "group.name=trainer"});
  EXPECT_EQ(cfg->timeout(), std::chrono::seconds(5));
  EXPECT_EQ(cfg->groupName(), "trainer");
  EXPECT_THROW_WITH(configFrom(kSelfConfig, *registry, {"group.timeout=abc"}), ConfigError,
                    "--set group.timeout=abc", "not a duration");
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

}  // namespace
}  // namespace commhost::test
