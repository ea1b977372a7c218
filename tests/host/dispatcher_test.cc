// SPDX-License-Identifier: Apache-2.0
#include "test_util.h"

namespace commhost::test {
namespace {

Capabilities cpuAll() {
  return {Capabilities::allOps(), Capabilities::allDTypes(), Capabilities::allReduceOps(), {DeviceType::CPU}, {}};
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
  EXPECT_EQ(names[table.route(OpType::Allreduce, DeviceType::CPU, 8)], "small");
  EXPECT_EQ(names[table.route(OpType::Allreduce, DeviceType::CPU, 65536)], "small");
  EXPECT_EQ(names[table.route(OpType::Allreduce, DeviceType::CPU, 65537)], "ar");
  EXPECT_EQ(names[table.route(OpType::Gather, DeviceType::CPU, 65537)], "general");
  EXPECT_EQ(names[table.route(OpType::Broadcast, DeviceType::CPU, 100)], "general");
  // An op route beats a device route even without naming the device.
  EXPECT_EQ(names[table.route(OpType::Broadcast, DeviceType::CPU, 1 << 20)], "bigbcast");
  EXPECT_EQ(table.route(OpType::Allreduce, DeviceType::CUDA, 8), -1);
  EXPECT_FALSE(table.servesDevice(DeviceType::CUDA));
}

TEST(RouteTable, WildcardRouteFallsBackForOpsTheBackendLacks) {
  Capabilities partial = cpuAll();
  partial.ops = {OpType::Allreduce, OpType::Broadcast};
  const auto table = RouteTable::build({route(DeviceType::CPU, std::nullopt, 0, INT64_MAX, "general"),
                                        route(std::nullopt, std::nullopt, 0, INT64_MAX, "fast")},
                                       {{"general", cpuAll()}, {"fast", partial}});
  const auto& names = table.backendNames();
  EXPECT_EQ(names[table.route(OpType::Alltoall, DeviceType::CPU, 8)], "general");
  // Both are wildcard on op; the device route is more specific.
  EXPECT_EQ(names[table.route(OpType::Allreduce, DeviceType::CPU, 8)], "general");
}

TEST(RouteTable, RouteToMissingOpIsAnError) {
  Capabilities partial = cpuAll();
  partial.ops = {OpType::Allreduce};
  EXPECT_THROW_WITH(RouteTable::build({route(DeviceType::CPU, std::nullopt, 0, INT64_MAX, "general"),
                                       route(DeviceType::CPU, OpType::Alltoall, 0, INT64_MAX, "fast")},
                                      {{"general", cpuAll()}, {"fast", partial}}),
                    ConfigError, "routes[fast]", "sends alltoall to backend 'fast', which does not implement it");
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

}  // namespace
}  // namespace commhost::test
