// SPDX-License-Identifier: Apache-2.0
// The nccl backend's intra-node allreduce, the parts that need no GPU: NVML link readings
// turned into the NVLink matrix (fake readings of NVSwitch, DGX-1 and PCIe machines), the
// setup records, the group and access checks, the all-or-nothing agreement over a real
// HashStore with ranks as threads, the step accounting, the kernel config every rank must
// share, the region layout, signatures and error texts, and the launch API's refusals.
// The kernels themselves run in tests/gpu (nccl_intra_gpu_test.cc).
#include <dlfcn.h>

#include <cstdio>
#include <set>

#include "../host/test_util.h"
#include "commhost/kernels/intra_allreduce.h"
#include "commhost/kernels/intra_protocol.h"
#include "commhost/sdk/backend_sdk.h"
#include "intra_comm.h"
#include "intra_setup.h"
#include "nvml_links.h"

namespace commhost::test {
namespace {

using namespace commhost::nccl_backend;
using kernels::IntraAlgo;
using kernels::NvlTopology;

std::string bus(int i) {
  char b[16];
  std::snprintf(b, sizeof(b), "0000:%02x:00.0", i);
  return b;
}

NvLinkEnd gpu(const std::string& busId) { return {NvLinkEnd::Kind::Gpu, busId}; }
NvLinkEnd toSwitch() { return {NvLinkEnd::Kind::Switch, ""}; }

TEST(NcclIntraSetup, BusIdsNormalizeAcrossNvmlAndCudaSpellings) {
  EXPECT_EQ(normalizeBusId("00000000:07:00.0"), "0000:07:00.0");  // NVML: 8-digit domain
  EXPECT_EQ(normalizeBusId("0000:0A:00.0"), "0000:0a:00.0");      // CUDA, upper case
  EXPECT_EQ(normalizeBusId("0001:c3:1f.1"), "0001:c3:1f.1");
  EXPECT_EQ(normalizeBusId("not a bus id"), "");
  EXPECT_EQ(normalizeBusId("0000:07:00.0 trailing"), "");
  EXPECT_EQ(normalizeBusId(""), "");
}

TEST(NcclIntraSetup, NvSwitchLinksMakeAFullyConnectedMatrix) {
  // 8 H100s, 18 links each, every one to a switch.
  std::vector<std::string> ids;
  std::vector<std::optional<std::vector<NvLinkEnd>>> links;
  for (int r = 0; r < 8; ++r) {
    ids.push_back(bus(0x18 + r));
    links.emplace_back(std::vector<NvLinkEnd>(18, toSwitch()));
  }
  const kernels::NvlMesh mesh = nvlMeshFromLinks(ids, links);
  ASSERT_EQ(mesh.size(), 8u);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j) EXPECT_EQ(mesh[i][j], i == j ? 0 : 18) << i << "," << j;
  EXPECT_EQ(kernels::detectTopology(mesh), NvlTopology::FullyConnected);
}

TEST(NcclIntraSetup, DirectLinksCountPerPeerInNvmlSpelling) {
  // Two GPUs joined by four links; NVML names the far end in its own spelling, and one
  // link goes to a GPU outside the group (ignored).
  std::vector<std::string> ids{"0000:07:00.0", "0000:0a:00.0"};
  std::vector<std::optional<std::vector<NvLinkEnd>>> links(2);
  links[0] = std::vector<NvLinkEnd>(4, gpu("00000000:0A:00.0"));
  links[0]->push_back(gpu("00000000:99:00.0"));
  links[1] = std::vector<NvLinkEnd>(4, gpu("00000000:07:00.0"));
  const kernels::NvlMesh mesh = nvlMeshFromLinks(ids, links);
  ASSERT_EQ(mesh.size(), 2u);
  EXPECT_EQ(mesh[0][1], 4);
  EXPECT_EQ(mesh[1][0], 4);
  EXPECT_EQ(mesh[0][0], 0);
  EXPECT_EQ(kernels::detectTopology(mesh), NvlTopology::FullyConnected);
}

TEST(NcclIntraSetup, Dgx1LinksMakeAHybridCubeMesh) {
  // Quads {0,1,2,3} and {4,5,6,7} fully linked inside, plus i <-> i+4.
  std::vector<std::string> ids;
  std::vector<std::optional<std::vector<NvLinkEnd>>> links(8, std::vector<NvLinkEnd>{});
  for (int r = 0; r < 8; ++r) ids.push_back(bus(0x30 + r));
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j)
      if (i != j && (i / 4 == j / 4 || j == (i + 4) % 8)) links[i]->push_back(gpu(ids[j]));
  EXPECT_EQ(kernels::detectTopology(nvlMeshFromLinks(ids, links)), NvlTopology::HybridCubeMesh);
}

TEST(NcclIntraSetup, MissingOrPcieReadingsMakeTheTopologyUnknown) {
  std::vector<std::string> ids{bus(1), bus(2), bus(3)};
  std::vector<std::optional<std::vector<NvLinkEnd>>> links(3, std::vector<NvLinkEnd>(6, toSwitch()));
  links[1] = std::nullopt;  // NVML missing on rank 1
  EXPECT_TRUE(nvlMeshFromLinks(ids, links).empty());
  EXPECT_EQ(kernels::detectTopology(nvlMeshFromLinks(ids, links)), NvlTopology::Unknown);
  // PCIe only: readings with no links at all.
  std::vector<std::optional<std::vector<NvLinkEnd>>> none(3, std::vector<NvLinkEnd>{});
  EXPECT_EQ(kernels::detectTopology(nvlMeshFromLinks(ids, none)), NvlTopology::Unknown);
  // Rank 2's switch links only: no pair with rank 2 is linked both ways.
  std::vector<std::optional<std::vector<NvLinkEnd>>> partial(3, std::vector<NvLinkEnd>{});
  partial[0]->push_back(gpu(ids[1]));
  partial[1]->push_back(gpu(ids[0]));
  partial[2]->push_back(toSwitch());
  EXPECT_EQ(kernels::detectTopology(nvlMeshFromLinks(ids, partial)), NvlTopology::Unknown);
}

RankInfo info(const std::string& host, const std::string& busId, int sms = 132) {
  RankInfo r;
  r.host = host;
  r.process = "1234-99";
  r.busId = busId;
  r.smCount = sms;
  r.links = std::vector<NvLinkEnd>{toSwitch(), gpu("0000:0b:00.0"), {NvLinkEnd::Kind::Other, ""}};
  return r;
}

TEST(NcclIntraSetup, RankInfoRoundTripsAndMalformedRecordsAreRefused) {
  const RankInfo a = info("node1 boot abc", "0000:07:00.0", 108);
  const RankInfo b = decodeRankInfo(encodeRankInfo(a));
  EXPECT_EQ(b.host, a.host);
  EXPECT_EQ(b.process, a.process);
  EXPECT_EQ(b.busId, a.busId);
  EXPECT_EQ(b.smCount, 108);
  ASSERT_TRUE(b.links.has_value());
  ASSERT_EQ(b.links->size(), 3u);
  EXPECT_EQ((*b.links)[0].kind, NvLinkEnd::Kind::Switch);
  EXPECT_EQ((*b.links)[1].kind, NvLinkEnd::Kind::Gpu);
  EXPECT_EQ((*b.links)[1].busId, "0000:0b:00.0");
  EXPECT_EQ((*b.links)[2].kind, NvLinkEnd::Kind::Other);

  RankInfo noNvml = a;
  noNvml.links.reset();
  noNvml.nvmlWhy = "libnvidia-ml.so.1 not loadable:\nno such file";  // the newline is flattened
  const RankInfo c = decodeRankInfo(encodeRankInfo(noNvml));
  EXPECT_FALSE(c.links.has_value());
  EXPECT_EQ(c.nvmlWhy, "libnvidia-ml.so.1 not loadable: no such file");

  EXPECT_THROW_WITH(decodeRankInfo("garbage"), BackendError, "malformed", "same commhost build");
  EXPECT_THROW_WITH(decodeRankInfo("intra1\nh\np\n0000:01:00.0\nmany\nnvml ok\n"), BackendError, "SM count");
  EXPECT_THROW_WITH(decodeRankInfo("intra1\nh\np\n0000:01:00.0\n4\nnvml ok\nwormhole\n"), BackendError, "wormhole");
}

TEST(NcclIntraSetup, TheGroupCheckNamesRanksOnOtherHostsOrSharingAGpu) {
  std::vector<RankInfo> ok{info("h boot 1", bus(1)), info("h boot 1", bus(2)), info("h boot 1", bus(3))};
  EXPECT_EQ(checkGroup(ok), "");
  auto hosts = ok;
  hosts[2].host = "other boot 2";
  EXPECT_NE(checkGroup(hosts).find("ranks 0 and 2 run on different hosts"), std::string::npos) << checkGroup(hosts);
  auto shared = ok;
  shared[2].busId = "00000000:01:00.0";  // rank 0's GPU in NVML's spelling
  EXPECT_NE(checkGroup(shared).find("ranks 0 and 2 use the same GPU"), std::string::npos) << checkGroup(shared);
  auto bad = ok;
  bad[1].busId = "";
  EXPECT_NE(checkGroup(bad).find("rank 1 reported the PCI bus id"), std::string::npos);
}

TEST(NcclIntraSetup, TheAccessCheckAsksForEveryPeerButItself) {
  std::vector<RankInfo> all{info("h", bus(1)), info("h", bus(2)), info("h", bus(3))};
  std::set<std::string> asked;
  EXPECT_EQ(checkAccess(all, 1,
                        [&](const std::string& id) {
                          asked.insert(id);
                          return std::string();
                        }),
            "");
  EXPECT_EQ(asked, (std::set<std::string>{bus(1), bus(3)}));
  const std::string why = checkAccess(all, 0, [&](const std::string& id) {
    return id == bus(3) ? std::string("cudaDeviceCanAccessPeer says no peer access between them") : std::string();
  });
  EXPECT_NE(why.find("cannot map rank 2's GPU (" + bus(3) + "): cudaDeviceCanAccessPeer says no"), std::string::npos)
      << why;
}

BackendContext contextFor(int rank, int world, StorePtr store) {
  BackendContext ctx;
  ctx.groupName = "main";
  ctx.backendName = "nccl";
  ctx.rank = rank;
  ctx.worldSize = world;
  ctx.timeout = std::chrono::seconds(20);
  ctx.store = std::move(store);
  return ctx;
}

TEST(NcclIntraAgreement, OneRankUnableMeansNobodyUsesIntraAndEveryoneKnowsWhy) {
  constexpr int kWorld = 4;
  auto store = std::make_shared<HashStore>(std::chrono::seconds(20));
  std::vector<Agreement> got(kWorld);
  runRanks(kWorld, [&](int rank) {
    const BackendContext ctx = contextFor(rank, kWorld, store);
    const Verdict mine = rank == 2 ? Verdict{false, "its GPU cannot map rank 0's GPU: no peer access"}
                                   : Verdict{true, "handle-of-" + std::to_string(rank)};
    got[rank] = agree(ctx, "nccl_intra/0/ready", mine);
  });
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_FALSE(got[r].ok) << "rank " << r;
    EXPECT_EQ(got[r].reason, "rank 2: its GPU cannot map rank 0's GPU: no peer access") << "rank " << r;
    EXPECT_TRUE(got[r].payloads.empty());
  }
}

TEST(NcclIntraAgreement, EveryRankAbleGivesEveryPayloadInRankOrder) {
  constexpr int kWorld = 3;
  auto store = std::make_shared<HashStore>(std::chrono::seconds(20));
  std::vector<Agreement> got(kWorld);
  runRanks(kWorld, [&](int rank) {
    got[rank] = agree(contextFor(rank, kWorld, store), "k", {true, "p" + std::to_string(rank)});
  });
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_TRUE(got[r].ok);
    EXPECT_EQ(got[r].payloads, (std::vector<std::string>{"p0", "p1", "p2"}));
  }
}

TEST(NcclIntraAgreement, AMissingRankTimesOutNamingIt) {
  BackendContext ctx = contextFor(0, 2, std::make_shared<HashStore>(std::chrono::seconds(5)));
  ctx.timeout = std::chrono::milliseconds(200);
  EXPECT_THROW_WITH(agree(ctx, "nccl_intra/0/ready", {true, "x"}), TimeoutError, "ranks 1", "nccl_intra/0/ready");
}

TEST(NcclIntraAgreement, WithoutAUsableDeviceEveryRankDeclinesForTheSameReason) {
  // The real setup on this machine: no GPU, so no PCI bus id; every rank sees every
  // record and declines alike (nobody waits for a peer that went ahead).
  int devices = 0;
  const bool gpu = cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
  (void)cudaGetLastError();
  if (gpu) GTEST_SKIP() << "a CUDA device is usable here: tests/gpu covers the real setup";
  constexpr int kWorld = 3;
  auto store = std::make_shared<HashStore>(std::chrono::seconds(20));
  std::vector<std::string> why(kWorld);
  // One char per rank, not vector<bool>: its elements share words, so rank threads
  // writing different elements would race (ThreadSanitizer reported it).
  std::vector<char> made(kWorld, 1);
  runRanks(kWorld, [&](int rank) {
    const BackendContext ctx = contextFor(rank, kWorld, store);
    made[rank] = IntraComm::create({&ctx, 0, "nccl_intra/0", {}}, &why[rank]) != nullptr;
  });
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_FALSE(made[r]);
    EXPECT_EQ(why[r], why[0]);
    EXPECT_NE(why[r].find("PCI bus id"), std::string::npos) << why[r];
  }
  std::string one;
  const BackendContext alone = contextFor(0, 1, store);
  EXPECT_EQ(IntraComm::create({&alone, 0, "nccl_intra/1", {}}, &one), nullptr);
  EXPECT_EQ(one, "2 to 8 ranks only, the group has 1");
}

TEST(NcclIntraSteps, BasesAdvanceByEachAlgorithmsStepsAndAgreeAcrossRanks) {
  EXPECT_EQ(kernels::intraSteps(IntraAlgo::OneShot), kernels::intra::kOneShotSteps);
  EXPECT_EQ(kernels::intraSteps(IntraAlgo::TwoShot), kernels::intra::kTwoShotSteps);
  const std::vector<IntraAlgo> calls{IntraAlgo::OneShot, IntraAlgo::TwoShot, IntraAlgo::TwoShot, IntraAlgo::OneShot};
  std::vector<std::vector<uint64_t>> bases(4);
  runRanks(4, [&](int rank) {
    kernels::IntraSteps steps;
    for (IntraAlgo a : calls) bases[rank].push_back(steps.take(a));
    EXPECT_EQ(steps.next(), 6u);
  });
  EXPECT_EQ(bases[0], (std::vector<uint64_t>{0, 1, 3, 5}));
  for (int r = 1; r < 4; ++r) EXPECT_EQ(bases[r], bases[0]);
}

TEST(NcclIntraConfig, TheGridComesFromTheSmallestDeviceSoEveryRankLaunchesTheSame) {
  EXPECT_EQ(kernels::chooseIntraConfig(132, 10 << 20).blocks, kernels::kIntraMaxBlocks);
  EXPECT_EQ(kernels::chooseIntraConfig(16, 10 << 20).blocks, 16);
  EXPECT_EQ(kernels::chooseIntraConfig(0, 10 << 20).blocks, 1);
  const kernels::IntraConfig c = kernels::chooseIntraConfig(108, 10 << 20);
  EXPECT_EQ(c.threads, kernels::kIntraThreads);
  EXPECT_EQ(c.depth, 3);
  EXPECT_EQ(c.slotBytes, size_t{10} << 20);
  EXPECT_EQ(kernels::chooseIntraConfig(108, 1000).slotBytes, 1024u);  // rounded up to 256
  // Ranks on devices of different sizes exchange their records (as create() does) and
  // choose from the smallest: the same config everywhere.
  const std::vector<int> sms{20, 16, 24};
  auto store = std::make_shared<HashStore>(std::chrono::seconds(20));
  std::vector<kernels::IntraConfig> chosen(sms.size());
  runRanks(3, [&](int rank) {
    const BackendContext ctx = contextFor(rank, 3, store);
    int fewest = 1 << 30;
    for (const std::string& text : exchangeAll(ctx, "cfg", encodeRankInfo(info("h", bus(rank + 1), sms[rank])), "test"))
      fewest = std::min(fewest, decodeRankInfo(text).smCount);
    chosen[rank] = kernels::chooseIntraConfig(fewest, 10 << 20);
  });
  for (const auto& c2 : chosen) EXPECT_TRUE(c2 == chosen[0]);
  EXPECT_EQ(chosen[0].blocks, 16);
}

TEST(NcclIntraConfig, TheLayoutKeepsSlotsAndFlagsApartAndAligned) {
  for (int blocks : {1, 7, 24}) {
    kernels::IntraConfig c = kernels::chooseIntraConfig(blocks, 4096);
    const kernels::IntraLayout l = kernels::intraLayout(c);
    const size_t table = static_cast<size_t>(blocks) * kernels::kIntraMaxRanks * sizeof(uint64_t);
    EXPECT_EQ(l.posted, 3 * c.slotBytes);
    EXPECT_GE(l.consumed, l.posted + table);
    EXPECT_GE(l.signatures, l.consumed + table);
    EXPECT_GE(l.claim, l.signatures + 3 * table);
    EXPECT_GE(l.bytes, l.claim + sizeof(uint32_t));
    EXPECT_EQ(l.flagBytes, l.bytes - l.posted);
    for (size_t off : {l.posted, l.consumed, l.signatures, l.claim, l.bytes}) EXPECT_EQ(off % 256, 0u);
  }
}

TEST(NcclIntraSignature, EveryFieldTellsCallsApartAndReadsBack) {
  using kernels::intraSignature;
  const uint64_t base = intraSignature(1024, DType::Float32, ReduceOp::Sum, IntraAlgo::OneShot);
  EXPECT_NE(base, 0u);
  EXPECT_NE(base, intraSignature(1025, DType::Float32, ReduceOp::Sum, IntraAlgo::OneShot));
  EXPECT_NE(base, intraSignature(1024, DType::BFloat16, ReduceOp::Sum, IntraAlgo::OneShot));
  EXPECT_NE(base, intraSignature(1024, DType::Float32, ReduceOp::Avg, IntraAlgo::OneShot));
  EXPECT_NE(base, intraSignature(1024, DType::Float32, ReduceOp::Sum, IntraAlgo::TwoShot));
  EXPECT_NE(intraSignature(0, DType::Float32, ReduceOp::Sum, IntraAlgo::OneShot), 0u);  // never "none"
  EXPECT_EQ(kernels::describeIntraSignature(base), "1024 x f32 sum (one-shot)");
  EXPECT_EQ(
      kernels::describeIntraSignature(intraSignature(5 << 20, DType::BFloat16, ReduceOp::Avg, IntraAlgo::TwoShot)),
      "5242880 x bf16 avg (two-shot)");
}

TEST(NcclIntraErrors, TheRecordReadsAsASentence) {
  kernels::IntraError e;
  e.code = kernels::kIntraMismatch;
  e.peer = 2;
  e.block = 3;
  e.step = 17;
  e.mine = kernels::intraSignature(1024, DType::Float32, ReduceOp::Sum, IntraAlgo::OneShot);
  e.theirs = kernels::intraSignature(512, DType::Float32, ReduceOp::Sum, IntraAlgo::OneShot);
  EXPECT_EQ(kernels::describeIntraError(e),
            "the ranks disagree on the allreduce: this rank has 1024 x f32 sum (one-shot), rank 2 has 512 x f32 sum "
            "(one-shot) (block 3, step 17)");
  e.code = kernels::kIntraTimeout;
  e.wait = kernels::kIntraWaitConsumed;
  EXPECT_EQ(kernels::describeIntraError(e),
            "peer 2 did not finish reading its step within the timeout (block 3, step 17)");
  e.code = kernels::kIntraAborted;
  e.peer = -1;
  EXPECT_NE(kernels::describeIntraError(e).find("aborted before it started"), std::string::npos);
}

TEST(NcclIntraLaunch, ArgumentsTheKernelsDoNotServeAreRefusedBeforeAnyDeviceWork) {
  kernels::IntraError error;
  uint32_t abortWord = 0;
  static uint8_t fakeRegion[1];  // never touched: the refusal comes first
  kernels::IntraLaunch a;
  a.count = 16;
  a.data = fakeRegion;
  a.world = 2;
  a.regions[0] = a.regions[1] = fakeRegion;
  a.config = kernels::chooseIntraConfig(24, 1 << 20);
  a.layout = kernels::intraLayout(a.config);
  a.error = &error;
  a.abortWord = &abortWord;
  const int invalid = static_cast<int>(cudaErrorInvalidValue);
  auto with = [&](auto change) {
    kernels::IntraLaunch b = a;
    change(b);
    return kernels::launchIntraAllreduce(b, nullptr);
  };
  EXPECT_EQ(with([](auto& b) { b.dtype = DType::Int32; }), invalid);
  EXPECT_EQ(with([](auto& b) { b.op = ReduceOp::Max; }), invalid);
  EXPECT_EQ(with([](auto& b) { b.algo = IntraAlgo::HybridCubeMesh; }), invalid);
  EXPECT_EQ(with([](auto& b) { b.world = 9; }), invalid);
  EXPECT_EQ(with([](auto& b) { b.regions[1] = nullptr; }), invalid);
  EXPECT_EQ(with([](auto& b) { b.count = (2 << 20) / 4; }), invalid);  // larger than a slot
  EXPECT_EQ(with([](auto& b) { b.config.depth = 2; }), invalid);
}

TEST(NcclIntraSetup, NvmlLoadedAtRunTimeSaysWhyItHasNoReading) {
  // No GPU sits at this bus id anywhere; without NVML (here) the reason names the library,
  // with it the lookup. Either way no reading and a reason, never a crash or a link error.
  std::string why;
  EXPECT_FALSE(readNvLinks("0000:ff:1f.7", &why).has_value());
  EXPECT_FALSE(why.empty());
  void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!nvml) {
    EXPECT_NE(why.find("libnvidia-ml.so.1"), std::string::npos) << why;
  }
}

TEST(NcclIntraSetup, HexRoundTripsAndRefusesGarbage) {
  const uint64_t v = 0x0123456789abcdefULL;
  const std::string hex = toHex(&v, sizeof(v));
  EXPECT_EQ(hex.size(), 16u);
  uint64_t back = 0;
  EXPECT_TRUE(fromHex(hex, &back, sizeof(back)));
  EXPECT_EQ(back, v);
  EXPECT_FALSE(fromHex("zz" + hex.substr(2), &back, sizeof(back)));
  EXPECT_FALSE(fromHex(hex.substr(1), &back, sizeof(back)));
}

}  // namespace
}  // namespace commhost::test
