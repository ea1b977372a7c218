// SPDX-License-Identifier: Apache-2.0
// NOLINTBEGIN(concurrency-mt-unsafe): these tests set the environment while no other thread runs
// The ProcessGroup over the self backend: every op's result at world size 1, and every
// validation error before anything reaches a backend.
#include "test_util.h"

namespace commhost::test {
namespace {

class SelfGroup : public ::testing::Test {
 protected:
  void SetUp() override { pg = makeGroups(kSelfConfig, 1)[0]; }
  static Tensor filled(int64_t n, float start) {
    Tensor t = Tensor::empty({n}, DType::Float32);
    for (int64_t i = 0; i < n; ++i) t.data_as<float>()[i] = start + static_cast<float>(i);
    return t;
  }
  std::shared_ptr<ProcessGroup> pg;
};

TEST_F(SelfGroup, ReductionsAtWorldSizeOne) {
  Tensor t = filled(4, 1);
  pg->allreduce(t)->wait();
  EXPECT_FLOAT_EQ(t.data_as<float>()[3], 4);
  pg->allreduce(t, {ReduceOp::preMulSum(0.5)})->wait();
  EXPECT_FLOAT_EQ(t.data_as<float>()[3], 2);
  pg->allreduce(t, {ReduceOp::Avg})->wait();
  EXPECT_FLOAT_EQ(t.data_as<float>()[3], 2);
  Tensor h = Tensor::empty({2}, DType::Float16);
  h.data_as<uint16_t>()[0] = 0x4000;  // 2.0
  pg->reduce(h, {0, ReduceOp::preMulSum(1.5)})->wait();
  EXPECT_EQ(h.data_as<uint16_t>()[0], 0x4200);  // 3.0
  EXPECT_EQ(pg->seq(), 4u);
}

// bytesIssued counts each issued op's payload once, and nothing for a refused call.
TEST_F(SelfGroup, BytesIssuedCountsEachOpsPayloadOnce) {
  EXPECT_EQ(pg->bytesIssued(), 0u);
  Tensor t = filled(4, 1);
  pg->allreduce(t)->wait();
  EXPECT_EQ(pg->bytesIssued(), 16u);
  Tensor d = Tensor::empty({3}, DType::Float64);
  pg->broadcast(d)->wait();
  EXPECT_EQ(pg->bytesIssued(), 16u + 24u);
  EXPECT_THROW(pg->broadcast(d, {5}), InvalidArgument);  // root outside the group
  EXPECT_EQ(pg->bytesIssued(), 16u + 24u);
}

TEST_F(SelfGroup, CopyingOpsAtWorldSizeOne) {
  Tensor in = filled(6, 10), out = Tensor::empty({6}, DType::Float32);
  std::vector<Tensor> outs = {out};
  pg->allgather(outs, in)->wait();
  EXPECT_FLOAT_EQ(out.data_as<float>()[5], 15);
  Tensor out2 = Tensor::empty({6}, DType::Float32);
  pg->allgatherIntoTensor(out2, in)->wait();
  EXPECT_FLOAT_EQ(out2.data_as<float>()[0], 10);
  Tensor rs = Tensor::empty({6}, DType::Float32);
  pg->reduceScatterTensor(rs, in)->wait();
  EXPECT_FLOAT_EQ(rs.data_as<float>()[1], 11);
  Tensor a2a = Tensor::empty({6}, DType::Float32);
  AlltoallSingleOptions splits;
  splits.inputSplitSizes = {6};
  splits.outputSplitSizes = {6};
  pg->alltoallSingle(a2a, in, splits)->wait();
  EXPECT_FLOAT_EQ(a2a.data_as<float>()[2], 12);
  Tensor sc = Tensor::empty({6}, DType::Float32);
  pg->scatter(sc, {in}, {0})->wait();
  EXPECT_FLOAT_EQ(sc.data_as<float>()[4], 14);
  std::vector<Tensor> gathered = {Tensor::empty({6}, DType::Float32)};
  pg->gather(gathered, in, {0})->wait();
  EXPECT_FLOAT_EQ(gathered[0].data_as<float>()[4], 14);
  auto work = pg->barrier();
  EXPECT_TRUE(work->isCompleted());
  EXPECT_EQ(work->op(), OpType::Barrier);
  EXPECT_EQ(work->seq(), pg->seq());
  pg->monitoredBarrier();
  std::vector<Tensor> many = {filled(2, 1), filled(3, 1)};
  pg->allreduceCoalesced(many, {ReduceOp::preMulSum(2)})->wait();
  EXPECT_FLOAT_EQ(many[1].data_as<float>()[2], 6);
  EXPECT_EQ(pg->allreduce(many[0])->future()->wait().size(), 1u);
}

TEST_F(SelfGroup, ValidationErrorsNameGroupRankOpSeq) {
  Tensor f = filled(4, 0);
  Tensor i32 = Tensor::empty({4}, DType::Int32);
  EXPECT_THROW_WITH(pg->allreduce(f, {ReduceOp::BXor}), InvalidArgument,
                    "[group main rank 0] allreduce seq 1: reduce op bxor needs an integer");
  EXPECT_THROW_WITH(pg->allreduce(i32, {ReduceOp::Avg}), InvalidArgument, "avg needs a floating-point tensor");
  EXPECT_THROW_WITH(pg->broadcast(f, {3}), InvalidArgument, "broadcast seq 1: root 3 is outside the group (size 1)");
  Tensor undefined;
  EXPECT_THROW_WITH(pg->allreduce(undefined), InvalidArgument, "undefined tensor");
  Tensor gpu = Tensor::fromBlob(reinterpret_cast<void*>(0x1000), {4}, DType::Float32, Device::cuda(0));
  EXPECT_THROW_WITH(pg->allreduce(gpu), InvalidArgument, "f32[4] on cuda:0", "no route serves cuda");
  std::vector<Tensor> two = {f, f};
  EXPECT_THROW_WITH(pg->allgather(two, f), InvalidArgument, "got 2 output tensors, expected 1");
  std::vector<Tensor> wrongType = {i32};
  EXPECT_THROW_WITH(pg->allgather(wrongType, f), InvalidArgument, "outputs[0] is i32[4] on cpu but must match f32[4]");
  Tensor small = Tensor::empty({3}, DType::Float32);
  EXPECT_THROW_WITH(pg->allgatherIntoTensor(small, f), InvalidArgument, "output has 3 elements, expected");
  AlltoallSingleOptions bad;
  bad.inputSplitSizes = {3};
  EXPECT_THROW_WITH(pg->alltoallSingle(f, f, bad), InvalidArgument, "input split sizes add up to 3 rows");
  EXPECT_THROW_WITH(pg->send(f, 0), InvalidArgument, "send seq 1", "destination rank 0 is this rank itself");
  EXPECT_THROW_WITH(pg->recv(f, 5), InvalidArgument, "source rank 5 is outside the group");
  EXPECT_THROW_WITH(pg->recvAnySource(f), InvalidArgument, "no peer");
  EXPECT_THROW_WITH(pg->newGroup({0, 0}), InvalidArgument, "duplicates");
  EXPECT_EQ(pg->seq(), 0u);  // nothing was issued
}

TEST_F(SelfGroup, AbortFailsLaterCalls) {
  pg->abort("operator stop");
  Tensor f = filled(4, 0);
  EXPECT_THROW_WITH(pg->allreduce(f), AbortedError, "allreduce seq 1: the group was aborted");
}

TEST(ProcessGroupCreate, ConfigHashMismatchNamesBothRanks) {
  auto registry = testRegistry();
  auto store = std::make_shared<HashStore>(std::chrono::seconds(5));
  auto a = configFrom("backends: { ref: { plugin: storecoll } }\nroutes: [{ device: cpu, backend: ref }]\n", *registry);
  auto b = configFrom(
      "group: { timeout: 5s }\nbackends: { ref: { plugin: storecoll } }\nroutes: [{ device: cpu, backend: ref }]\n",
      *registry);
  ProcessGroup::create({a, registry, store, 0, 2});
  EXPECT_THROW_WITH(ProcessGroup::create({b, registry, store, 1, 2}), ConfigError, "[group main rank 1]",
                    "rank 0 loaded one with hash", "every rank must use the same config");
}

TEST(ProcessGroupCreate, UnavailableBackendFailsOnlyWhenUsed) {
  auto registry = testRegistry();
  auto config = configFrom(
      "backends: { self: {}, gpu: { plugin: probed } }\n"
      "routes: [{ device: cpu, backend: self }, { device: cuda, backend: gpu }]\n",
      *registry);
  auto pg = ProcessGroup::create({config, registry, std::make_shared<HashStore>(), 0, 1});
  Tensor cpu = Tensor::empty({2}, DType::Float32);
  pg->allreduce(cpu)->wait();
  Tensor gpu = Tensor::fromBlob(reinterpret_cast<void*>(0x1000), {4}, DType::Float32, Device::cuda(0));
  EXPECT_THROW_WITH(pg->allreduce(gpu), PluginError, "backend 'gpu', which is unavailable", "no CUDA device visible");
}

// A backend listed first whose plugin cannot run here (probedcpu: its probe says no) is
// passed over for the next one; the table's fallback section says so with the reason.
TEST(ProcessGroupCreate, AFallbackListSkipsAnUnavailableBackend) {
  auto registry = testRegistry();
  auto config = configFrom(
      "backends: { self: {}, mine: { plugin: probedcpu } }\n"
      "routes: [{ device: cpu, backend: [mine, self] }]\n",
      *registry);
  const std::string table = RouteTable::forConfig(*config, *registry).describe();
  EXPECT_NE(table.find("cpu broadcast 0+ bytes -> self: 'mine' is unavailable here (no CUDA device visible (test "
                       "plugin))"),
            std::string::npos)
      << table;
  auto pg = ProcessGroup::create({config, registry, std::make_shared<HashStore>(), 0, 1});
  Tensor t = Tensor::empty({4}, DType::Float32);
  pg->allreduce(t)->wait();  // through self: before, "routed to backend 'mine', which is unavailable"
  pg->broadcast(t)->wait();
}

// Ranks that disagree on which backends can run would route one op to different backends:
// the group refuses to form, naming both sides.
TEST(ProcessGroupCreate, RanksThatDifferInWhichBackendsCanRunRefuseToForm) {
  auto registry = testRegistry();
  auto config = configFrom(
      "backends: { self: {}, gpu: { plugin: probedcpu } }\n"
      "routes: [{ device: cpu, backend: [gpu, self] }]\n",
      *registry);
  auto store = std::make_shared<HashStore>(std::chrono::seconds(5));
  // Another rank of the job found every backend usable.
  store->compareSet("main/1/config_unavailable", {}, toBytes("- rank 1"));  // the group's first creation
  EXPECT_THROW_WITH(ProcessGroup::create({config, registry, store, 0, 1}), ConfigError,
                    "ranks differ in which backends can run: on this rank not 'gpu': no CUDA device visible",
                    "rank 1: every backend can", "make the plugin usable on every rank");
}

// A backend only ever named alone on its route is not compared: mixed hosts (one with a
// GPU) still form a group, and a call to it fails where it cannot run.
TEST(ProcessGroupCreate, ABackendNamedAloneNeedNotRunOnEveryRank) {
  auto registry = testRegistry();
  auto config = configFrom(
      "backends: { self: {}, gpu: { plugin: probed } }\n"
      "routes: [{ device: cpu, backend: self }, { device: cuda, backend: gpu }]\n",
      *registry);
  auto store = std::make_shared<HashStore>(std::chrono::seconds(5));
  store->compareSet("main/1/config_unavailable", {}, toBytes("- rank 1"));
  EXPECT_NE(ProcessGroup::create({config, registry, store, 0, 1}), nullptr);
}

// A partial backend first in a route's list: the cells its manifest serves (cpu f32 sum)
// go to it, the rest (another dtype or reduce op) to self; barrier has no dtype and
// multi-tensor ops route by their tensors' dtype.
TEST(PartialBackend, ListedFirstItServesWhatItDeclaresAndSelfTheRest) {
  auto pg = makeGroups("backends: { partial: {}, self: {} }\nroutes: [{ device: cpu, backend: [partial, self] }]\n",
                       1)[0];
  const RouteTable& routes = pg->routes();
  auto to = [&](OpType op, DType dtype, ReduceOp::Kind kind) {
    return routes.backendNames()[routes.route(op, DeviceType::CPU, 64, dtype, kind)];
  };
  EXPECT_EQ(to(OpType::Allreduce, DType::Float32, ReduceOp::Sum), "partial");
  EXPECT_EQ(to(OpType::Allreduce, DType::Float64, ReduceOp::Sum), "self");
  EXPECT_EQ(to(OpType::Allreduce, DType::Float32, ReduceOp::Max), "self");
  EXPECT_EQ(to(OpType::Barrier, DType::BFloat16, ReduceOp::Avg), "partial");  // no dtype: one cell
  EXPECT_EQ(to(OpType::Gather, DType::Int64, ReduceOp::Sum), "self");
  Tensor f32 = Tensor::empty({4}, DType::Float32), f64 = Tensor::empty({4}, DType::Float64);
  pg->allreduce(f32)->wait();
  pg->allreduce(f64)->wait();
  pg->allreduce(f32, {ReduceOp::Max})->wait();
  std::vector<Tensor> many = {f64, Tensor::empty({2}, DType::Float64)};
  pg->allreduceCoalesced(many)->wait();
  pg->barrier()->wait();
  EXPECT_EQ(pg->seq(), 5u);
}

// Its manifest claims broadcast, which it does not override: Backend's default refuses,
// naming the backend and the op, with the group, rank and seq of the call.
TEST(PartialBackend, AnOpItDoesNotImplementIsNotSupportedNamingBackendAndOp) {
  auto pg = makeGroups("backends: { partial: {} }\nroutes: [{ device: cpu, backend: partial }]\n", 1)[0];
  Tensor t = Tensor::empty({4}, DType::Float32);
  EXPECT_THROW_WITH(pg->broadcast(t), NotSupportedError, "[group main rank 0] broadcast seq 1",
                    "backend 'partial' does not implement broadcast", "remove the op from the plugin's Capabilities");
  try {
    pg->broadcast(t);
    ADD_FAILURE() << "broadcast did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::NotSupported);
    EXPECT_STREQ(e.where().op, "broadcast");
    EXPECT_EQ(e.where().seq, 2u);
  }
}

// A cell that no route's backends serve because of its dtype is no load error (most
// configs name no dtype), but the call fails with a hint naming routes: keys that exist.
TEST(PartialBackend, UnservedDTypeFailsNamingTheRouteKeys) {
  auto pg = makeGroups("backends: { partial: {} }\nroutes: [{ device: cpu, backend: partial }]\n", 1)[0];
  Tensor f32 = Tensor::empty({4}, DType::Float32), f64 = Tensor::empty({4}, DType::Float64);
  pg->allreduce(f32)->wait();
  EXPECT_THROW_WITH(pg->allreduce(f64), InvalidArgument, "[group main rank 0] allreduce seq 2",
                    "no route serves allreduce f64 sum on cpu", "'partial' lacks the dtype",
                    "`routes: - { op: allreduce, dtype: f64, reduce_op: sum, backend: [NAME, ...] }`");
}

TEST(LaunchEnv, SlurmMasterIsTheFirstHostOfTheNodeList) {
  ::setenv("SLURM_PROCID", "0", 1);
  ::setenv("SLURM_NTASKS", "2", 1);
  ::unsetenv("MASTER_ADDR");
  for (const auto& [list, first] : std::vector<std::pair<std::string, std::string>>{
           {"node[01-04,07],gpu5", "node01"},
           {"a12,b3", "a12"},
           {"solo", "solo"},
           {"rack1-n[9,10]", "rack1-n9"},
           {"n[3", ""},  // malformed: no master, so the store's error asks for MASTER_ADDR
           {"", ""}}) {
    ::setenv("SLURM_STEP_NODELIST", list.c_str(), 1);
    EXPECT_EQ(detectLaunch().masterAddr, first) << list;
  }
  for (const char* v : {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_STEP_NODELIST"}) ::unsetenv(v);
}

TEST(LaunchEnv, TorchrunMpiAndSlurm) {
  auto clear = [] {
    for (const char* v : {"RANK",
                          "WORLD_SIZE",
                          "LOCAL_RANK",
                          "LOCAL_WORLD_SIZE",
                          "MASTER_ADDR",
                          "MASTER_PORT",
                          "OMPI_COMM_WORLD_RANK",
                          "OMPI_COMM_WORLD_SIZE",
                          "OMPI_COMM_WORLD_LOCAL_RANK",
                          "OMPI_COMM_WORLD_LOCAL_SIZE",
                          "SLURM_PROCID",
                          "SLURM_NTASKS",
                          "SLURM_LOCALID",
                          "SLURM_JOB_ID",
                          "SLURM_STEP_NODELIST",
                          "SLURM_JOB_NODELIST",
                          "PMI_RANK",
                          "PMI_SIZE",
                          "MPI_LOCALRANKID",
                          "MPI_LOCALNRANKS"})
      ::unsetenv(v);
  };
  clear();
  EXPECT_EQ(detectLaunch().launcher, "none");
  ::setenv("SLURM_PROCID", "3", 1);
  ::setenv("SLURM_NTASKS", "4", 1);
  ::setenv("SLURM_LOCALID", "1", 1);
  auto slurm = detectLaunch();
  EXPECT_EQ(slurm.launcher, "slurm");
  EXPECT_EQ(slurm.rank, 3);
  EXPECT_EQ(slurm.localRank, 1);
  EXPECT_EQ(slurm.masterAddr, "");  // no node list: the store's own error names MASTER_ADDR
  EXPECT_EQ(slurm.masterPort, 0);
  // The store on the step's first host, on a port from the job id; MASTER_* still win.
  ::setenv("SLURM_JOB_NODELIST", "login[1-2]", 1);
  ::setenv("SLURM_STEP_NODELIST", "gpu[007-012,020],cpu3", 1);
  ::setenv("SLURM_JOB_ID", "123456", 1);
  slurm = detectLaunch();
  EXPECT_EQ(slurm.masterAddr, "gpu007");
  EXPECT_EQ(slurm.masterPort, 29500 + 3456);
  ::setenv("MASTER_ADDR", "10.1.1.1", 1);
  ::setenv("MASTER_PORT", "4000", 1);
  slurm = detectLaunch();
  EXPECT_EQ(slurm.masterAddr, "10.1.1.1");
  EXPECT_EQ(slurm.masterPort, 4000);
  ::unsetenv("MASTER_ADDR");
  ::unsetenv("MASTER_PORT");
  // MPICH / Intel MPI (Hydra) before Slurm: mpiexec inside an allocation.
  ::setenv("PMI_RANK", "2", 1);
  ::setenv("PMI_SIZE", "6", 1);
  ::setenv("MPI_LOCALRANKID", "0", 1);
  ::setenv("MPI_LOCALNRANKS", "3", 1);
  auto pmi = detectLaunch();
  EXPECT_EQ(pmi.launcher, "pmi");
  EXPECT_EQ(pmi.rank, 2);
  EXPECT_EQ(pmi.worldSize, 6);
  EXPECT_EQ(pmi.localWorldSize, 3);
  EXPECT_EQ(pmi.masterPort, 0);  // Slurm's derived port only for Slurm's ranks
  ::setenv("OMPI_COMM_WORLD_RANK", "1", 1);
  ::setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  EXPECT_EQ(detectLaunch().launcher, "openmpi");
  ::setenv("RANK", "2", 1);
  ::setenv("WORLD_SIZE", "3", 1);
  ::setenv("MASTER_ADDR", "10.0.0.1", 1);
  ::setenv("MASTER_PORT", "29500", 1);
  auto torch = detectLaunch();
  EXPECT_EQ(torch.launcher, "torchrun");
  EXPECT_EQ(torch.rank, 2);
  EXPECT_EQ(torch.worldSize, 3);
  EXPECT_EQ(torch.masterPort, 29500);
  ::setenv("RANK", "5", 1);
  EXPECT_THROW_WITH(detectLaunch(), ConfigError, "rank 5 of world size 3");
  ::setenv("RANK", "two", 1);
  EXPECT_THROW_WITH(detectLaunch(), ConfigError, "RANK='two'");
  clear();
}

}  // namespace
}  // namespace commhost::test
// NOLINTEND(concurrency-mt-unsafe)

namespace commhost::test {
namespace {

// The calling thread's current stream reaches the backend in OpContext::stream, a
// StreamGuard restores the previous one, and another thread has its own.
TEST(CurrentStream, TheCallersStreamReachesTheBackendPerThread) {
  auto groups = makeGroups(
      "backends: { echo: { plugin: stream_echo }, self: {} }\nroutes: [{ device: cpu, backend: [echo, self] }]\n", 1);
  auto echoed = [&] {
    Tensor t = Tensor::empty({1}, DType::Int64);
    groups[0]->allreduce(t)->wait();
    return t.data_as<int64_t>()[0];
  };
  EXPECT_EQ(echoed(), 0) << "no stream set: the legacy default stream (null)";
  {
    StreamGuard guard(reinterpret_cast<void*>(0x1234));
    EXPECT_EQ(echoed(), 0x1234);
    std::thread other([&] { EXPECT_EQ(echoed(), 0) << "the current stream is per thread"; });
    other.join();
  }
  EXPECT_EQ(echoed(), 0) << "the guard restored the previous stream";
}

}  // namespace
}  // namespace commhost::test
