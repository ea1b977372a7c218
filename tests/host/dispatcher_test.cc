// SPDX-License-Identifier: Apache-2.0
#include "test_util.h"

namespace commhost::test {
namespace {

Capabilities cpuAll() {
  return {Capabilities::allOps(), Capabilities::allDTypes(), Capabilities::allReduceOps(), {DeviceType::CPU}, {}};
}

RouteSpec keyed(std::optional<OpType> op, std::optional<DType> dtype, std::optional<ReduceOp::Kind> reduceOp,
                std::vector<std::string> backends) {
  RouteSpec r;
  r.op = op;
  r.dtype = dtype;
  r.reduceOp = reduceOp;
  r.backend = backends[0];
  r.fallback.assign(backends.begin() + 1, backends.end());
  r.where = "routes[" + backends[0] + "]";
  return r;
}

RouteSpec route(std::optional<DeviceType> device, std::optional<OpType> op, int64_t lo, int64_t hi,
                const std::string& backend) {
  RouteSpec r;
  r.device = device;
  r.op = op;
  r.minBytes = lo;
  r.maxBytes = hi;
  r.backend = backend;
  r.where = "routes[" + backend + "]";
  return r;
}

TEST(RouteTable, MostSpecificWins) {
  const auto table = RouteTable::build(
      {route(DeviceType::CPU, std::nullopt, 0, INT64_MAX, "general"),
       route(DeviceType::CPU, OpType::Allreduce, 0, INT64_MAX, "ar"),
       route(DeviceType::CPU, OpType::Allreduce, 0, 65536, "small"),
       route(std::nullopt, OpType::Broadcast, 1 << 20, INT64_MAX, "bigbcast")},
      {{"general", cpuAll()}, {"ar", cpuAll()}, {"small", cpuAll()}, {"bigbcast", cpuAll()}});
  const auto& names = table.backendNames();
  EXPECT_EQ(names[table.route(OpType::Allreduce, DeviceType::CPU, 8, DType::Float32, ReduceOp::Sum)], "small");
  EXPECT_EQ(names[table.route(OpType::Allreduce, DeviceType::CPU, 65536, DType::Float32, ReduceOp::Sum)], "small");
  EXPECT_EQ(names[table.route(OpType::Allreduce, DeviceType::CPU, 65537, DType::Float32, ReduceOp::Sum)], "ar");
  EXPECT_EQ(names[table.route(OpType::Gather, DeviceType::CPU, 65537, DType::Float32, ReduceOp::Sum)], "general");
  EXPECT_EQ(names[table.route(OpType::Broadcast, DeviceType::CPU, 100, DType::Float32, ReduceOp::Sum)], "general");
  // An op route beats a device route even without naming the device.
  EXPECT_EQ(names[table.route(OpType::Broadcast, DeviceType::CPU, 1 << 20, DType::Float32, ReduceOp::Sum)], "bigbcast");
  EXPECT_EQ(table.route(OpType::Allreduce, DeviceType::CUDA, 8, DType::Float32, ReduceOp::Sum), -1);
  EXPECT_FALSE(table.servesDevice(DeviceType::CUDA));
}

TEST(RouteTable, WildcardRouteFallsBackForOpsTheBackendLacks) {
  Capabilities partial = cpuAll();
  partial.ops = {OpType::Allreduce, OpType::Broadcast};
  const auto table = RouteTable::build({route(DeviceType::CPU, std::nullopt, 0, INT64_MAX, "general"),
                                        route(std::nullopt, std::nullopt, 0, INT64_MAX, "fast")},
                                       {{"general", cpuAll()}, {"fast", partial}});
  const auto& names = table.backendNames();
  EXPECT_EQ(names[table.route(OpType::Alltoall, DeviceType::CPU, 8, DType::Float32, ReduceOp::Sum)], "general");
  // Both are wildcard on op; the device route is more specific.
  EXPECT_EQ(names[table.route(OpType::Allreduce, DeviceType::CPU, 8, DType::Float32, ReduceOp::Sum)], "general");
}

TEST(RouteTable, RouteToMissingOpIsAnError) {
  Capabilities partial = cpuAll();
  partial.ops = {OpType::Allreduce};
  EXPECT_THROW_WITH(RouteTable::build({route(DeviceType::CPU, std::nullopt, 0, INT64_MAX, "general"),
                                       route(DeviceType::CPU, OpType::Alltoall, 0, INT64_MAX, "fast")},
                                      {{"general", cpuAll()}, {"fast", partial}}),
                    ConfigError, "routes[fast]", "route sends alltoall on cpu to backend 'fast', which cannot serve it",
                    "'fast' does not implement alltoall");
}

TEST(RouteTable, UnservedOpNamesOpAndDevice) {
  Capabilities partial = cpuAll();
  partial.ops = {OpType::Allreduce};
  EXPECT_THROW_WITH(
      RouteTable::build({route(DeviceType::CPU, std::nullopt, 0, INT64_MAX, "fast")}, {{"fast", partial}}), ConfigError,
      "no route serves broadcast on cpu", "no route serves alltoall_single on cpu");
}

TEST(RouteTable, SizeGapIsAnError) {
  EXPECT_THROW_WITH(RouteTable::build({route(DeviceType::CPU, std::nullopt, 0, 1023, "a"),
                                       route(DeviceType::CPU, std::nullopt, 2048, INT64_MAX, "a")},
                                      {{"a", cpuAll()}}),
                    ConfigError, "for messages of 1024..2047 bytes");
}

TEST(RouteTable, MonitoredBarrierIsServedByTheHost) {
  Capabilities partial = cpuAll();
  partial.ops.remove(OpType::MonitoredBarrier);
  EXPECT_NO_THROW(RouteTable::build({route(DeviceType::CPU, std::nullopt, 0, INT64_MAX, "a")}, {{"a", partial}}));
}

// Manifests like a specialised backend's: `mine` has allreduce on f32 with sum only,
// `shm` allreduce and broadcast on f32/f64 with sum and max, `gloo` everything.
Capabilities mine() {
  Capabilities c = cpuAll();
  c.ops = {OpType::Allreduce};
  c.dtypes = {DType::Float32};
  c.reduceOps = {ReduceOp::Sum};
  return c;
}
Capabilities shm() {
  Capabilities c = cpuAll();
  c.ops = {OpType::Allreduce, OpType::Broadcast};
  c.dtypes = {DType::Float32, DType::Float64};
  c.reduceOps = {ReduceOp::Sum, ReduceOp::Max};
  return c;
}

// A fallback list exists for backends that cannot run everywhere: one whose plugin is
// unavailable here is passed over, and the table says so with the reason. Alone on its
// route it still takes the cells, so a call fails naming why instead of finding no route.
TEST(RouteTable, AListPassesOverAnUnavailableBackendSayingWhy) {
  const auto table = RouteTable::build({keyed(std::nullopt, std::nullopt, std::nullopt, {"mine", "shm", "gloo"})},
                                       {{"mine", mine()}, {"shm", shm()}, {"gloo", cpuAll()}},
                                       {"wrong ABI (test)", "", ""});
  const auto& names = table.backendNames();
  auto to = [&](OpType op, DType dtype, ReduceOp::Kind kind) {
    return names[table.route(op, DeviceType::CPU, 100, dtype, kind)];
  };
  EXPECT_EQ(to(OpType::Allreduce, DType::Float32, ReduceOp::Sum), "shm");
  EXPECT_EQ(to(OpType::Allreduce, DType::BFloat16, ReduceOp::Sum), "gloo");
  EXPECT_EQ(to(OpType::Broadcast, DType::Float32, ReduceOp::Sum), "shm");
  const std::string described = table.describe();
  EXPECT_NE(described.find("cpu allreduce f32 sum 0+ bytes -> shm: 'mine' is unavailable here (wrong ABI (test))\n"),
            std::string::npos)
      << described;
  // What a backend lacks comes before whether it can run: 'mine' has no avg either way.
  EXPECT_NE(described.find("cpu allreduce f32 avg,product,min,band,bor,bxor,premul_sum 0+ bytes -> gloo: 'mine', 'shm' "
                           "lack the reduce op\n"),
            std::string::npos)
      << described;

  const auto alone = RouteTable::build({keyed(OpType::Allreduce, std::nullopt, std::nullopt, {"mine"}),
                                        keyed(std::nullopt, std::nullopt, std::nullopt, {"gloo"})},
                                       {{"mine", mine()}, {"gloo", cpuAll()}}, {"no device", ""});
  EXPECT_EQ(alone.backendNames()[alone.route(OpType::Allreduce, DeviceType::CPU, 100, DType::Float32, ReduceOp::Sum)],
            "mine");
}

TEST(RouteTable, ListResolvesEachCellToTheFirstBackendThatServesIt) {
  const auto table = RouteTable::build({keyed(std::nullopt, std::nullopt, std::nullopt, {"mine", "shm", "gloo"})},
                                       {{"mine", mine()}, {"shm", shm()}, {"gloo", cpuAll()}});
  const auto& names = table.backendNames();
  auto to = [&](OpType op, DType dtype, ReduceOp::Kind kind) {
    return names[table.route(op, DeviceType::CPU, 100, dtype, kind)];
  };
  EXPECT_EQ(to(OpType::Allreduce, DType::Float32, ReduceOp::Sum), "mine");
  EXPECT_EQ(to(OpType::Allreduce, DType::Float64, ReduceOp::Sum), "shm");
  EXPECT_EQ(to(OpType::Allreduce, DType::Float32, ReduceOp::Max), "shm");
  EXPECT_EQ(to(OpType::Allreduce, DType::BFloat16, ReduceOp::Sum), "gloo");
  EXPECT_EQ(to(OpType::Allreduce, DType::Float32, ReduceOp::Avg), "gloo");
  EXPECT_EQ(to(OpType::Broadcast, DType::Float32, ReduceOp::Sum), "shm");
  EXPECT_EQ(to(OpType::Broadcast, DType::Float32, ReduceOp::Avg), "shm");  // no reduce op: one cell
  EXPECT_EQ(to(OpType::Alltoall, DType::Float32, ReduceOp::Sum), "gloo");
  EXPECT_EQ(to(OpType::Barrier, DType::Int8, ReduceOp::Max), "gloo");  // no dtype: one cell
  const std::string described = table.describe();
  EXPECT_NE(described.find("cpu allreduce f32 sum 0+ bytes -> mine\n"), std::string::npos) << described;
  EXPECT_NE(described.find("cpu allreduce f32 max 0+ bytes -> shm\n"), std::string::npos) << described;
  EXPECT_NE(described.find("cpu allreduce f64 sum,max 0+ bytes -> shm\n"), std::string::npos) << described;
  EXPECT_NE(described.find("cpu broadcast f32,f64 0+ bytes -> shm\n"), std::string::npos) << described;
  EXPECT_NE(described.find("cpu allreduce f32 avg,product,min,band,bor,bxor,premul_sum 0+ bytes -> gloo: 'mine', 'shm' "
                           "lack the reduce op\n"),
            std::string::npos)
      << described;
  EXPECT_NE(
      described.find("cpu allreduce bool,i8,u8,i32,i64,f16,bf16 0+ bytes -> gloo: 'mine', 'shm' lack the dtype\n"),
      std::string::npos)
      << described;
  EXPECT_EQ(described.find("unserved"), std::string::npos) << described;
}

// op > dtype > reduce op > device, whatever the order of the routes.
TEST(RouteTable, SpecificityOrdersOpThenDTypeThenReduceOpThenDevice) {
  const auto table = RouteTable::build({route(DeviceType::CPU, std::nullopt, 0, INT64_MAX, "gloo"),
                                        keyed(std::nullopt, std::nullopt, ReduceOp::Max, {"maxer"}),
                                        keyed(std::nullopt, DType::Float64, std::nullopt, {"wide"}),
                                        keyed(OpType::Allreduce, std::nullopt, std::nullopt, {"shm"})},
                                       {{"gloo", cpuAll()}, {"maxer", cpuAll()}, {"wide", cpuAll()}, {"shm", shm()}});
  const auto& names = table.backendNames();
  auto to = [&](OpType op, DType dtype, ReduceOp::Kind kind) {
    return names[table.route(op, DeviceType::CPU, 100, dtype, kind)];
  };
  EXPECT_EQ(to(OpType::Allreduce, DType::Float64, ReduceOp::Max), "shm");   // op beats dtype and reduce op
  EXPECT_EQ(to(OpType::Reduce, DType::Float64, ReduceOp::Max), "wide");     // dtype beats reduce op
  EXPECT_EQ(to(OpType::Reduce, DType::Float32, ReduceOp::Max), "maxer");    // reduce op beats device
  EXPECT_EQ(to(OpType::Broadcast, DType::Float32, ReduceOp::Max), "gloo");  // reduce_op never selects broadcast
  // The op route's backend lacks bf16 and the left-out dtype key matches only what it
  // serves, so the cell falls to the next route that can serve it, and describe() says so.
  EXPECT_EQ(to(OpType::Allreduce, DType::BFloat16, ReduceOp::Max), "maxer");
  EXPECT_NE(table.describe().find("cpu allreduce bool,i8,u8,i32,i64,f16,bf16 max 0+ bytes -> maxer: route at "
                                  "routes[shm]: 'shm' lacks the dtype"),
            std::string::npos)
      << table.describe();
}

TEST(RouteTable, DTypeAndReduceOpRoutes) {
  const auto table = RouteTable::build({route(DeviceType::CPU, std::nullopt, 0, INT64_MAX, "gloo"),
                                        keyed(OpType::Allreduce, DType::Float32, std::nullopt, {"mine", "shm"}),
                                        keyed(OpType::Allreduce, std::nullopt, ReduceOp::Max, {"shm"})},
                                       {{"gloo", cpuAll()}, {"mine", mine()}, {"shm", shm()}});
  const auto& names = table.backendNames();
  auto to = [&](DType dtype, ReduceOp::Kind kind) {
    return names[table.route(OpType::Allreduce, DeviceType::CPU, 100, dtype, kind)];
  };
  EXPECT_EQ(to(DType::Float32, ReduceOp::Sum), "mine");
  EXPECT_EQ(to(DType::Float32, ReduceOp::Max), "shm");  // mine lacks max: the list goes on
  EXPECT_EQ(to(DType::Float64, ReduceOp::Max), "shm");
  EXPECT_EQ(to(DType::Float64, ReduceOp::Sum), "gloo");
  EXPECT_EQ(to(DType::Int32, ReduceOp::Max), "gloo");  // shm lacks i32: the device route takes it
}

// A route naming a dtype (or reduce op, or op) that none of its backends serves is a load
// error naming the cell and each backend's reason.
TEST(RouteTable, NamedCellNoListedBackendServesIsAnError) {
  EXPECT_THROW_WITH(RouteTable::build({route(DeviceType::CPU, std::nullopt, 0, INT64_MAX, "gloo"),
                                       keyed(OpType::Allreduce, DType::BFloat16, std::nullopt, {"mine", "shm"})},
                                      {{"gloo", cpuAll()}, {"mine", mine()}, {"shm", shm()}}),
                    ConfigError, "routes[mine]: route sends allreduce bf16 to [mine, shm], which cannot serve it",
                    "'mine' lacks dtype bf16; 'shm' lacks dtype bf16");
  EXPECT_THROW_WITH(RouteTable::build({route(DeviceType::CPU, std::nullopt, 0, INT64_MAX, "gloo"),
                                       keyed(OpType::Allreduce, std::nullopt, ReduceOp::Avg, {"shm"})},
                                      {{"gloo", cpuAll()}, {"shm", shm()}}),
                    ConfigError, "route sends allreduce avg to backend 'shm'", "'shm' lacks reduce op avg");
  EXPECT_THROW_WITH(RouteTable::build({route(DeviceType::CPU, std::nullopt, 0, INT64_MAX, "gloo"),
                                       keyed(OpType::Broadcast, std::nullopt, ReduceOp::Max, {"gloo"})},
                                      {{"gloo", cpuAll()}}),
                    ConfigError, "reduce_op applies only to reducing ops", "not broadcast");
}

// A dtype the only backend lacks leaves that cell unserved: not a load error, and the
// lookup says why.
TEST(RouteTable, DTypeNoBackendHasIsUnservedNotAnError) {
  Capabilities f32Only = cpuAll();
  f32Only.dtypes = {DType::Float32};
  const auto table = RouteTable::build({route(DeviceType::CPU, std::nullopt, 0, INT64_MAX, "a")}, {{"a", f32Only}});
  EXPECT_EQ(table.route(OpType::Allreduce, DeviceType::CPU, 8, DType::Float32, ReduceOp::Sum), 0);
  EXPECT_EQ(table.route(OpType::Allreduce, DeviceType::CPU, 8, DType::BFloat16, ReduceOp::Sum), -1);
  EXPECT_EQ(table.route(OpType::Barrier, DeviceType::CPU, 0, DType::BFloat16, ReduceOp::Sum), 0);
  const std::string why = table.whyUnserved(OpType::Allreduce, DeviceType::CPU, 8, DType::BFloat16, ReduceOp::Sum);
  EXPECT_NE(why.find("no route serves allreduce bf16 sum on cpu"), std::string::npos) << why;
  EXPECT_NE(why.find("'a' lacks the dtype"), std::string::npos) << why;
  EXPECT_NE(table.describe().find("unserved"), std::string::npos);
}

TEST(RouteTable, EquallySpecificDTypeRoutesOverlappingAreAnError) {
  EXPECT_THROW_WITH(RouteTable::build({route(DeviceType::CPU, std::nullopt, 0, INT64_MAX, "gloo"),
                                       keyed(std::nullopt, DType::Float32, std::nullopt, {"a"}),
                                       keyed(std::nullopt, DType::Float32, std::nullopt, {"b"})},
                                      {{"gloo", cpuAll()}, {"a", cpuAll()}, {"b", cpuAll()}}),
                    ConfigError, "are equally specific");
  // The same keys resolving to the same backend do not conflict.
  EXPECT_NO_THROW(RouteTable::build({route(DeviceType::CPU, std::nullopt, 0, INT64_MAX, "gloo"),
                                     keyed(std::nullopt, DType::Float32, std::nullopt, {"a"}),
                                     keyed(std::nullopt, DType::Float32, std::nullopt, {"a", "gloo"})},
                                    {{"gloo", cpuAll()}, {"a", cpuAll()}}));
}

}  // namespace
}  // namespace commhost::test
