// SPDX-License-Identifier: Apache-2.0
// Typed plugin options (commhost/sdk/typed_options.h): the schema's specs, the conversion of
// validated values into the struct, and the refusals, each naming the key.
#include "commhost/sdk/typed_options.h"

#include "../../plugins/file_store/file_store.h"
#include "../../plugins/shm/shm_backend.h"
#include "commhost/config.h"
#include "test_util.h"

namespace commhost::test {
namespace {

enum class Algo { Ring, Tree };

struct Sample {
  int threads = 0;
  uint32_t segment = 0;
  std::chrono::milliseconds timeout{0};
  bool verbose = true;
  double ratio = 0;
  std::string device;
  std::string mode;
  Algo algorithm = Algo::Tree;
  std::vector<std::string> hosts{"x"};
  static OptionSchema<Sample> schema() {
    return OptionSchema<Sample>()
        .option("threads", &Sample::threads, "2", "worker threads", {1, 64})
        .size("segment", &Sample::segment, "1MiB", "segment size", {4096, 1 << 30})
        .option("timeout", &Sample::timeout, "5s", "timeout", {0.001, 60})
        .option("verbose", &Sample::verbose, "false", "chatty")
        .option("ratio", &Sample::ratio, "0.5", "a ratio", {0, 1})
        .option("device", &Sample::device, "lo", "interface")
        .choice("mode", &Sample::mode, "fast", "mode", {"fast", "safe"})
        .choice("algorithm", &Sample::algorithm, "ring", "algorithm", {{"ring", Algo::Ring}, {"tree", Algo::Tree}})
        .option("hosts", &Sample::hosts, "", "host list");
  }
  // Cross-field: a segment is split evenly between the threads, in 4 KiB pages.
  void validate() const {
    if (segment % (4096u * static_cast<uint32_t>(threads)))
      refuseOption("segment",
                   formatSize(segment) + " is not a multiple of 4KiB x threads (" + std::to_string(threads) + ")",
                   "set segment to a multiple of " + std::to_string(4096 * threads));
  }
};

OptionValues resolved(const std::map<std::string, std::string>& given) {
  return resolveOptions(typedOptionSpecs<Sample>(), given, "test");
}

TEST(TypedOptions, SchemaDeclaresEachKeyWithTheMembersType) {
  const auto& specs = typedOptionSpecs<Sample>();
  ASSERT_EQ(specs.size(), 9u);
  EXPECT_STREQ(specs[0].key, "threads");
  EXPECT_EQ(specs[0].type, OptionType::Int);
  EXPECT_STREQ(specs[0].defaultValue, "2");
  EXPECT_STREQ(specs[0].description, "worker threads");
  EXPECT_EQ(specs[0].minValue, 1);
  EXPECT_EQ(specs[0].maxValue, 64);
  EXPECT_EQ(specs[1].type, OptionType::Size);
  EXPECT_EQ(specs[2].type, OptionType::Duration);
  EXPECT_EQ(specs[3].type, OptionType::Bool);
  EXPECT_EQ(specs[4].type, OptionType::Double);
  EXPECT_EQ(specs[5].type, OptionType::String);
  EXPECT_EQ(specs[6].type, OptionType::Enum);
  EXPECT_EQ(specs[6].choices, (std::vector<std::string>{"fast", "safe"}));
  EXPECT_EQ(specs[7].type, OptionType::Enum);
  EXPECT_EQ(specs[7].choices, (std::vector<std::string>{"ring", "tree"}));
  EXPECT_EQ(specs[8].type, OptionType::StringList);
}

TEST(TypedOptions, DefaultsFillTheStruct) {
  // Through the host's validation (defaults filled there) and from no values at all.
  for (const OptionValues& values : {resolved({}), OptionValues{}}) {
    const Sample s = parseOptions<Sample>(values);
    EXPECT_EQ(s.threads, 2);
    EXPECT_EQ(s.segment, 1u << 20);
    EXPECT_EQ(s.timeout, std::chrono::seconds(5));
    EXPECT_FALSE(s.verbose);
    EXPECT_EQ(s.ratio, 0.5);
    EXPECT_EQ(s.device, "lo");
    EXPECT_EQ(s.mode, "fast");
    EXPECT_EQ(s.algorithm, Algo::Ring);
    EXPECT_TRUE(s.hosts.empty());
  }
}

TEST(TypedOptions, GivenValuesReachTheirMembers) {
  const Sample s = parseOptions<Sample>(resolved({{"threads", "4"},
                                                  {"segment", "64KiB"},
                                                  {"timeout", "250ms"},
                                                  {"verbose", "true"},
                                                  {"ratio", "0.25"},
                                                  {"device", "eth0"},
                                                  {"mode", "safe"},
                                                  {"algorithm", "tree"},
                                                  {"hosts", "[a, b]"}}));
  EXPECT_EQ(s.threads, 4);
  EXPECT_EQ(s.segment, 64u << 10);
  EXPECT_EQ(s.timeout, std::chrono::milliseconds(250));
  EXPECT_TRUE(s.verbose);
  EXPECT_EQ(s.ratio, 0.25);
  EXPECT_EQ(s.device, "eth0");
  EXPECT_EQ(s.mode, "safe");
  EXPECT_EQ(s.algorithm, Algo::Tree);
  EXPECT_EQ(s.hosts, (std::vector<std::string>{"a", "b"}));
}

TEST(TypedOptions, TypeMismatchIsRefusedNamingTheKey) {
  OptionValues values;
  values.set("threads", std::string("many"));
  EXPECT_THROW_WITH(parseOptions<Sample>(values), ConfigError, "option 'threads'", "expected type int, got string");
  OptionValues duration;
  duration.set("timeout", int64_t{5});
  EXPECT_THROW_WITH(parseOptions<Sample>(duration), ConfigError, "option 'timeout'",
                    "expected type duration, got integer");
}

TEST(TypedOptions, RangesAndChoicesAreCheckedAgain) {
  // The host checks YAML; values a program sets get the same checks here.
  OptionValues many;
  many.set("threads", int64_t{100});
  EXPECT_THROW_WITH(parseOptions<Sample>(many), ConfigError, "option 'threads'", "'100' is out of range",
                    "allowed: 1 to 64");
  OptionValues slow;
  slow.set("timeout", std::chrono::milliseconds(120000));
  EXPECT_THROW_WITH(parseOptions<Sample>(slow), ConfigError, "option 'timeout'", "out of range", "allowed: 1ms to 1m");
  OptionValues mode;
  mode.set("mode", std::string("reckless"));
  EXPECT_THROW_WITH(parseOptions<Sample>(mode), ConfigError, "option 'mode'", "'reckless' is not one of fast, safe");
  OptionValues algo;
  algo.set("algorithm", std::string("star"));
  EXPECT_THROW_WITH(parseOptions<Sample>(algo), ConfigError, "option 'algorithm'", "not one of ring, tree");
}

struct Narrow {
  int8_t small = 0;
  uint16_t port = 0;
  static OptionSchema<Narrow> schema() {
    return OptionSchema<Narrow>()
        .option("small", &Narrow::small, "1", "no range declared")
        .option("port", &Narrow::port, "0", "no range declared");
  }
};

TEST(TypedOptions, AValueTheMemberCannotHoldIsRefusedNotWrapped) {
  OptionValues big;
  big.set("small", int64_t{300});
  EXPECT_THROW_WITH(parseOptions<Narrow>(big), ConfigError, "option 'small'", "300 does not fit", "8-bit signed");
  OptionValues negative;
  negative.set("port", int64_t{-1});
  EXPECT_THROW_WITH(parseOptions<Narrow>(negative), ConfigError, "option 'port'", "-1 does not fit", "16-bit unsigned");
  OptionValues fine;
  fine.set("small", int64_t{-128});
  fine.set("port", int64_t{65535});
  EXPECT_EQ(parseOptions<Narrow>(fine).small, -128);
  EXPECT_EQ(parseOptions<Narrow>(fine).port, 65535);
}

TEST(TypedOptions, ValidateRunsAfterConversionAndNamesTheKey) {
  EXPECT_THROW_WITH(parseOptions<Sample>(resolved({{"threads", "3"}, {"segment", "16KiB"}})), ConfigError,
                    "option 'segment'", "16KiB is not a multiple of 4KiB x threads (3)", "multiple of 12288");
  EXPECT_EQ(parseOptions<Sample>(resolved({{"threads", "4"}, {"segment", "16KiB"}})).segment, 16u << 10);
}

// validate(const BackendContext&) sees the group; the factory sees only validated options.
struct PerRank {
  int64_t chunk = 0;
  static OptionSchema<PerRank> schema() {
    return OptionSchema<PerRank>().size("chunk", &PerRank::chunk, "256", "bytes per rank");
  }
  void validate(const BackendContext& ctx) const {
    if (chunk < 64 * ctx.worldSize) refuseOption("chunk", "too small for " + std::to_string(ctx.worldSize) + " ranks");
  }
};

int factoryCalls = 0;
int64_t factoryChunk = 0;
std::unique_ptr<Backend> createPerRank(const PerRank& options, const BackendContext&) {
  ++factoryCalls;
  factoryChunk = options.chunk;
  return nullptr;
}

TEST(TypedOptions, BackendFactoryAdapterConvertsOnceThenCallsTheTypedFactory) {
  auto(*factory)(const OptionValues&, const BackendContext&)->std::unique_ptr<Backend> =
      typedBackendFactory<PerRank, &createPerRank>;  // the descriptor's signature, unchanged
  BackendContext ctx;
  ctx.worldSize = 4;
  factoryCalls = 0;
  factory(resolveOptions(typedOptionSpecs<PerRank>(), {{"chunk", "1KiB"}}, "test"), ctx);
  EXPECT_EQ(factoryCalls, 1);
  EXPECT_EQ(factoryChunk, 1024);
  ctx.worldSize = 8;
  EXPECT_THROW_WITH(factory(resolveOptions(typedOptionSpecs<PerRank>(), {}, "test"), ctx), ConfigError,
                    "option 'chunk'", "too small for 8 ranks");
  EXPECT_EQ(factoryCalls, 1);  // refused before the plugin's own code ran
}

TEST(TypedOptions, ShmRefusesAChunkTooSmallForTheGroupNamingTheKey) {
  BackendContext ctx;
  ctx.worldSize = 65;  // 64 B per rank do not fit the smallest chunk (4 KiB)
  EXPECT_THROW_WITH(
      parseOptions<shm::Options>(resolveOptions(typedOptionSpecs<shm::Options>(), {{"chunk", "4KiB"}}, "test"), ctx),
      ConfigError, "option 'chunk'", "too small for 65 ranks", "at least 64 B x ranks (4160)");
  ctx.worldSize = 2;
  const auto options = parseOptions<shm::Options>(resolveOptions(typedOptionSpecs<shm::Options>(), {}, "test"), ctx);
  EXPECT_EQ(options.chunk, 256 << 10);
  EXPECT_EQ(options.depth, 4);
  EXPECT_EQ(options.spinUs, -1);
}

TEST(TypedOptions, FileStoreRequiresAPath) {
  StoreContext ctx;
  ctx.rank = 3;
  EXPECT_THROW_WITH(
      parseOptions<filestore::Options>(resolveOptions(typedOptionSpecs<filestore::Options>(), {}, "test"), ctx),
      ConfigError, "option 'path'", "[rank 3] file store", "set store.options.path");
}

}  // namespace
}  // namespace commhost::test
