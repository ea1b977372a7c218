// SPDX-License-Identifier: Apache-2.0
// The nccl backend's device-independent parts, run without a GPU: the manifest and type
// maps, the options schema and the NCCL config built from it, the unique-id exchange
// (real ncclGetUniqueId, ranks as threads over a HashStore), and the plugin as the host
// sees it where no CUDA device is usable (its probe's reason, and the route refused).
#include <cuda_runtime.h>

#include <cstring>

#include "../host/test_util.h"
#include "nccl_types.h"
#include "options.h"
#include "probe.h"
#include "unique_id.h"

namespace commhost::test {
namespace {

using namespace commhost::nccl_backend;

TEST(NcclTypes, EveryDTypeMapsToAnNcclTypeOfTheSameSize) {
  const auto& caps = nccl_backend::capabilities();
  for (int d = 0; d < kNumDTypes; ++d) {
    const auto dtype = static_cast<DType>(d);
    const auto type = toNccl(dtype);
    ASSERT_TRUE(type.has_value()) << dtypeName(dtype);
    EXPECT_TRUE(caps.dtypes.has(dtype)) << dtypeName(dtype);
    size_t size = 0;
    switch (*type) {
      case ncclInt8:
      case ncclUint8: size = 1; break;
      case ncclFloat16:
      case ncclBfloat16: size = 2; break;
      case ncclInt32:
      case ncclFloat32: size = 4; break;
      default: size = 8;
    }
    EXPECT_EQ(size, elementSize(dtype)) << dtypeName(dtype);
  }
  EXPECT_EQ(*toNccl(DType::Bool), ncclUint8);
  EXPECT_EQ(*toNccl(DType::Int8), ncclInt8);
  EXPECT_EQ(*toNccl(DType::BFloat16), ncclBfloat16);
  EXPECT_EQ(*toNccl(DType::Int64), ncclInt64);
}

TEST(NcclTypes, EveryReduceOpIsMappedOrLeftOutOfTheManifest) {
  const auto& caps = nccl_backend::capabilities();
  for (int k = 0; k < ReduceOp::kNumKinds; ++k) {
    const auto kind = static_cast<ReduceOp::Kind>(k);
    const bool bitwise = ReduceOp(kind).isBitwise();
    EXPECT_EQ(caps.reduceOps.has(kind), !bitwise) << reduceOpName(kind);
    if (kind == ReduceOp::PreMulSum || bitwise) EXPECT_FALSE(builtinRedOp(kind).has_value()) << reduceOpName(kind);
    else EXPECT_TRUE(builtinRedOp(kind).has_value()) << reduceOpName(kind);
  }
  EXPECT_EQ(*builtinRedOp(ReduceOp::Sum), ncclSum);
  EXPECT_EQ(*builtinRedOp(ReduceOp::Avg), ncclAvg);
  EXPECT_EQ(*builtinRedOp(ReduceOp::Product), ncclProd);
  EXPECT_EQ(*builtinRedOp(ReduceOp::Min), ncclMin);
  EXPECT_EQ(*builtinRedOp(ReduceOp::Max), ncclMax);
  // Bools as c10d reduces them: sum is or (max), product is and (min).
  EXPECT_EQ(*builtinRedOp(ReduceOp::Sum, DType::Bool), ncclMax);
  EXPECT_EQ(*builtinRedOp(ReduceOp::Product, DType::Bool), ncclMin);
  EXPECT_EQ(*builtinRedOp(ReduceOp::Sum, DType::UInt8), ncclSum);
}

TEST(NcclTypes, ManifestIsCudaOnlyWithTheIssuedOps) {
  const auto& caps = nccl_backend::capabilities();
  EXPECT_TRUE(caps.devices.has(DeviceType::CUDA));
  EXPECT_FALSE(caps.devices.has(DeviceType::CPU));
  // Every op but monitored_barrier (the host's); recv_any_source is declared and refused.
  for (int o = 0; o < kNumOpTypes; ++o)
    EXPECT_EQ(caps.ops.has(static_cast<OpType>(o)), static_cast<OpType>(o) != OpType::MonitoredBarrier)
        << opName(static_cast<OpType>(o));
  for (auto f : {Feature::Split, Feature::MultiProcess, Feature::MultiHost}) EXPECT_TRUE(caps.features.has(f));
  EXPECT_NE(describeNccl(ncclSystemError, nullptr).find(ncclGetErrorString(ncclSystemError)), std::string::npos);
}

OptionValues resolved(const std::map<std::string, std::string>& given) {
  return resolveOptions(typedOptionSpecs<Options>(), given, "backends.nccl.options");
}

TEST(NcclOptions, DefaultsAndTheConfigBuiltFromThem) {
  for (const OptionValues& values : {resolved({}), OptionValues{}}) {
    const Options o = parseOptions<Options>(values);
    EXPECT_FALSE(o.highPriorityStream);
    EXPECT_FALSE(o.blockingWait);
    EXPECT_FALSE(o.nanCheck);
    EXPECT_FALSE(o.enableTiming);  // untimed events unless asked
    EXPECT_FALSE(o.eagerInit);
    EXPECT_FALSE(o.intraNode);
    EXPECT_EQ(o.initTimeout.count(), 0);
    EXPECT_EQ(o.cgaClusterSize, -1);
    EXPECT_EQ(o.minCtas, -1);
    EXPECT_EQ(o.maxCtas, -1);
    EXPECT_EQ(o.netName, "");
    const ncclConfig_t c = configFor(o);
    EXPECT_EQ(c.blocking, 0);  // always non-blocking, so init and calls can be abandoned
    EXPECT_EQ(c.cgaClusterSize, NCCL_CONFIG_UNDEF_INT);
    EXPECT_EQ(c.minCTAs, NCCL_CONFIG_UNDEF_INT);
    EXPECT_EQ(c.maxCTAs, NCCL_CONFIG_UNDEF_INT);
    EXPECT_EQ(static_cast<const void*>(c.netName), static_cast<const void*>(NCCL_CONFIG_UNDEF_PTR));
    EXPECT_EQ(c.size, sizeof(ncclConfig_t));
    EXPECT_EQ(initTimeout(o, std::chrono::seconds(7)), std::chrono::seconds(7));
  }
}

TEST(NcclOptions, SetValuesReachTheConfig) {
  const Options o = parseOptions<Options>(resolved({{"cga_cluster_size", "4"},
                                                    {"min_ctas", "2"},
                                                    {"max_ctas", "16"},
                                                    {"net_name", "Socket"},
                                                    {"init_timeout", "90s"},
                                                    {"blocking_wait", "true"},
                                                    {"high_priority_stream", "true"},
                                                    {"enable_timing", "true"}}));
  EXPECT_TRUE(o.blockingWait);
  EXPECT_TRUE(o.enableTiming);
  EXPECT_TRUE(o.highPriorityStream);
  const ncclConfig_t c = configFor(o);
  EXPECT_EQ(c.blocking, 0);
  EXPECT_EQ(c.cgaClusterSize, 4);
  EXPECT_EQ(c.minCTAs, 2);
  EXPECT_EQ(c.maxCTAs, 16);
  ASSERT_NE(c.netName, nullptr);
  EXPECT_STREQ(c.netName, "Socket");
  EXPECT_EQ(initTimeout(o, std::chrono::seconds(7)), std::chrono::seconds(90));
}

TEST(NcclOptions, RangesAndRulesAreRefused) {
  EXPECT_THROW_WITH(resolved({{"cga_cluster_size", "9"}}), ConfigError, "cga_cluster_size", "out of range");
  EXPECT_THROW_WITH(resolved({{"max_ctas", "65"}}), ConfigError, "max_ctas", "out of range");
  EXPECT_THROW_WITH(resolved({{"min_ctas", "-2"}}), ConfigError, "min_ctas", "out of range");
  EXPECT_THROW_WITH(resolved({{"nan_check", "maybe"}}), ConfigError, "nan_check");
  EXPECT_THROW_WITH(resolved({{"no_such_key", "1"}}), ConfigError, "no_such_key");
  EXPECT_THROW_WITH(parseOptions<Options>(resolved({{"min_ctas", "8"}, {"max_ctas", "4"}})), ConfigError,
                    "option 'min_ctas'", "more than max_ctas (4)");
  EXPECT_THROW_WITH(parseOptions<Options>(resolved({{"max_ctas", "0"}})), ConfigError, "option 'max_ctas'", "not 0");
}

TEST(NcclUniqueId, RankZerosIdReachesEveryRankThroughTheStore) {
  constexpr int kWorld = 4;
  auto store = std::make_shared<HashStore>(std::chrono::seconds(20));
  std::vector<ncclUniqueId> ids(kWorld);
  runRanks(kWorld, [&](int rank) {
    // The real source on every rank: only rank 0 calls it.
    PrefixStore mine("group/backend/nccl", store);
    ids[rank] = exchangeUniqueId(mine, rank, uniqueIdKey(0), std::chrono::seconds(20), ncclIdSource({"main", rank}),
                                 {"main", rank});
  });
  for (int r = 1; r < kWorld; ++r) EXPECT_EQ(std::memcmp(ids[0].internal, ids[r].internal, sizeof(ids[0])), 0);
  EXPECT_TRUE(store->check({"group/backend/nccl/" + uniqueIdKey(0)}));
  EXPECT_NE(uniqueIdKey(0), uniqueIdKey(1));  // one id per communicator the backend makes
}

TEST(NcclUniqueId, AMissingRankZeroTimesOutNamingTheKey) {
  HashStore store(std::chrono::seconds(20));
  const IdSource never = []() -> ncclUniqueId { throw std::logic_error("only rank 0 makes the id"); };
  EXPECT_THROW_WITH(
      exchangeUniqueId(store, 1, uniqueIdKey(3), std::chrono::milliseconds(100), never, {"main", 1, "allreduce", 4}),
      TimeoutError, "[group main rank 1] allreduce seq 4", "nccl_uid/3", "rank 0", "init_timeout");
}

TEST(NcclUniqueId, AValueOfTheWrongSizeIsRefused) {
  HashStore store(std::chrono::seconds(20));
  store.set(uniqueIdKey(0), toBytes("short"));
  EXPECT_THROW_WITH(exchangeUniqueId(store, 2, uniqueIdKey(0), std::chrono::seconds(1), nullptr, {"main", 2}),
                    BackendError, "has 5 bytes", "same NCCL build");
}

// Seen on a one-GPU machine (two ranks started on it): NCCL's invalid usage at creation is
// a shared GPU, not a disagreement on an op, and the hint says so.
TEST(NcclTypes, CreationHintsNameTheSharedGpuAndKeepTheOpHintForOps) {
  const std::string duplicate =
      "NCCL error: invalid usage (last error: Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 60)";
  EXPECT_NE(nccl_backend::initHintFor(ncclInvalidUsage, duplicate).find("one GPU per rank"), std::string::npos);
  const std::string other = nccl_backend::initHintFor(ncclInvalidUsage, "NCCL error: invalid usage");
  EXPECT_NE(other.find("disagree on the communicator"), std::string::npos) << other;
  EXPECT_EQ(other.find("debug.check_collectives"), std::string::npos) << other;
  EXPECT_NE(nccl_backend::hintFor(ncclInvalidUsage).find("debug.check_collectives"), std::string::npos);
  EXPECT_EQ(nccl_backend::initHintFor(ncclSystemError, "x"), nccl_backend::hintFor(ncclSystemError));
}

// What the CUDA runtime says here: "" with a usable device.
std::string runtimeReason() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  (void)cudaGetLastError();
  if (e != cudaSuccess) return cudaGetErrorString(e);
  return count == 0 ? "no CUDA-capable device is detected" : "";
}

TEST(NcclPlugin, ProbeGivesTheRuntimesReason) { EXPECT_EQ(nccl_backend::probe(), runtimeReason()); }

TEST(NcclPlugin, LoadsAndAnUnusableDeviceRefusesTheRouteWithTheReason) {
  const std::string reason = runtimeReason();
  auto registry = testRegistry();
  const PluginEntry* entry = registry->find("nccl");
  ASSERT_NE(entry, nullptr);
  ASSERT_NE(entry->descriptor, nullptr) << entry->unavailable;  // loaded: the .so and its libraries resolve
  EXPECT_EQ(entry->unavailable, reason);
  if (reason.empty()) GTEST_SKIP() << "a CUDA device is usable here: tests/gpu/run.sh covers the backend";
  auto groups = makeGroups(
      "group: { timeout: 5s }\n"
      "store: hash\n"
      "backends: { nccl: {}, gloo: { options: { threads: 1, contexts: 1 } } }\n"
      "routes: [{ device: cuda, backend: nccl }, { device: cpu, backend: gloo }]\n",
      2);
  runRanks(2, [&](int rank) {
    // Never dereferenced: the host refuses the route before any backend sees the tensor.
    static float fake[4];
    Tensor t = Tensor::fromBlob(fake, {4}, DType::Float32, Device::cuda(0));
    EXPECT_THROW_WITH(groups[rank]->allreduce(t), PluginError, "backend 'nccl'", "unavailable on this host",
                      reason.c_str());
    Tensor cpu = Tensor::empty({4}, DType::Float32);
    groups[rank]->allreduce(cpu)->wait();  // the CPU route still works
  });
}

}  // namespace
}  // namespace commhost::test
