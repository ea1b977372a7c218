// SPDX-License-Identifier: Apache-2.0
// Shadow mode: a route's `shadow:` backend runs a sampled share of the calls over copies of
// their data; the results are compared and recorded; reconfigure(onlyIfShadowAgrees)
// refuses a backend whose shadow disagreed or never ran. Ranks are threads over a HashStore.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "commhost/process_group.h"
#include "commhost/store.h"
#include "test_util.h"

namespace commhost::test {
namespace {

std::string shadowConfig(const std::string& shadow, const std::string& extra = "sample: 1") {
  return "group: { timeout: 20s }\n"
         "backends: { gloo: { options: { threads: 1, contexts: 1 } }, ref: { plugin: storecoll },"
         " off: { plugin: offbyone } }\n"
         "routes: [{ device: cpu, backend: gloo, shadow: " +
         shadow + ", " + extra + " }]\n";
}

TEST(Shadow, AgreeingShadowIsRecordedAndTheCallerGetsThePrimarysResult) {
  auto groups = makeGroups(shadowConfig("ref"), 2);
  runRanks(2, [&](int r) {
    for (int iter = 0; iter < 5; ++iter) checkedAllreduce(*groups[r], iter);
    Tensor b = Tensor::empty({16}, DType::Int32);
    for (int i = 0; i < 16; ++i) b.data_as<int32_t>()[i] = r == 0 ? i : -1;
    groups[r]->broadcast(b)->wait();
    for (int i = 0; i < 16; ++i) ASSERT_EQ(b.data_as<int32_t>()[i], i);
    groups[r]->barrier()->wait();  // not shadowed (no data to compare), and still works
  });
  // The comparison completes on a backend thread after the caller's wait: poll briefly.
  for (int r = 0; r < 2; ++r) {
    std::vector<ShadowRecord> report;
    for (int i = 0; i < 500; ++i) {
      report = groups[r]->shadowReport();
      uint64_t done = 0;
      for (const auto& rec : report) done += rec.agreed + rec.disagreed + rec.failed;
      if (done == 6) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_EQ(report.size(), 2u) << "allreduce 256 B and broadcast 64 B";
    for (const auto& rec : report) {
      EXPECT_EQ(rec.backend, "gloo");
      EXPECT_EQ(rec.shadow, "ref");
      EXPECT_EQ(rec.disagreed, 0u) << rec.firstDisagreement;
      EXPECT_EQ(rec.failed, 0u) << rec.firstFailure;
      EXPECT_GT(rec.backendUs, 0);
      EXPECT_GT(rec.shadowUs, 0);
    }
    const auto& ar = report[0].op == "allreduce" ? report[0] : report[1];
    EXPECT_EQ(ar.op, "allreduce");
    EXPECT_EQ(ar.bytes, 256);
    EXPECT_EQ(ar.agreed, 5u);
  }
}

TEST(Shadow, DisagreeingShadowIsCaughtWithTheElementAndBothValues) {
  auto groups = makeGroups(shadowConfig("off"), 2);
  runRanks(2, [&](int r) {
    for (int iter = 0; iter < 3; ++iter) checkedAllreduce(*groups[r], iter);  // the caller still gets gloo's sum
  });
  std::vector<ShadowRecord> report;
  for (int i = 0; i < 500 && (report.empty() || report[0].disagreed < 3); ++i) {
    report = groups[0]->shadowReport();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(report.size(), 1u);
  EXPECT_EQ(report[0].disagreed, 3u);
  EXPECT_EQ(report[0].agreed, 0u);
  // Iteration 0: ranks give 1 and 2, so gloo's sum is 3 and the off-by-one shadow's 4.
  EXPECT_EQ(report[0].firstDisagreement,
            "element 0 of 64 (f32): 3 from the backend, 4 from the shadow (rtol 1e-05, atol 1e-06)");
}

TEST(Shadow, SamplingPicksTheSameCallsOnEveryRankAtAboutTheRate) {
  // Deterministic in seq: the same seqs on every rank (else the shadow backend, which sees
  // only sampled calls, would hang), and close to the rate.
  int picked = 0;
  for (uint64_t seq = 1; seq <= 100000; ++seq) picked += RouteTable::sampled(seq, 0.1);
  EXPECT_NEAR(picked, 10000, 500);
  EXPECT_FALSE(RouteTable::sampled(7, 0.0));
  auto groups = makeGroups(shadowConfig("ref", "sample: 0.3"), 3);
  runRanks(3, [&](int r) {
    for (int iter = 0; iter < 40; ++iter) checkedAllreduce(*groups[r], iter);
  });
  std::vector<uint64_t> samples(3);
  for (int r = 0; r < 3; ++r) {
    for (int i = 0; i < 500; ++i) {
      const auto report = groups[r]->shadowReport();
      samples[r] = report.empty() ? 0 : report[0].samples;
      if (!report.empty() && report[0].agreed == report[0].samples) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  EXPECT_EQ(samples[0], samples[1]);
  EXPECT_EQ(samples[0], samples[2]);
  EXPECT_GT(samples[0], 3u);
  EXPECT_LT(samples[0], 25u);
}

TEST(Shadow, ConfigErrorsNameTheRouteKey) {
  auto registry = testRegistry();
  EXPECT_THROW_WITH(configFrom(shadowConfig("nosuch"), *registry), ConfigError,
                    "shadow backend 'nosuch' is not configured");
  EXPECT_THROW_WITH(configFrom(shadowConfig("ref", "sample: 2"), *registry), ConfigError, "'2' is not a valid sample",
                    "(0, 1]");
  EXPECT_THROW_WITH(
      configFrom("backends: { gloo: {} }\nroutes: [{ device: cpu, backend: gloo, sample: 0.5 }]\n", *registry),
      ConfigError, "sample, rtol and atol apply to a shadow backend");
  // A shadow that serves none of its route's shadowable ops is refused at load, at its line.
  EXPECT_THROW_WITH(
      configFrom("backends: { gloo: {}, ref: { plugin: storecoll } }\n"
                 "routes: [{ device: cpu, backend: gloo }, { op: barrier, backend: gloo, shadow: ref }]\n",
                 *registry),
      ConfigError,
      "test.yaml:2:", "shadow 'ref' serves none of this route's allreduce, broadcast or allgather_into_tensor calls");
  // config check shows the shadow in the resolved table.
  auto ok = configFrom(shadowConfig("ref", "sample: 0.01"), *registry);
  EXPECT_NE(RouteTable::forConfig(*ok, *registry).describe().find("allreduce 0+ bytes -> gloo (shadow ref)"),
            std::string::npos)
      << RouteTable::forConfig(*ok, *registry).describe();
}

TEST(Shadow, OnlyIfShadowAgreesRefusesADisagreeingOrUnshadowedBackendAndAllowsAnAgreeingOne) {
  auto registry = testRegistry();
  auto store = std::make_shared<HashStore>(std::chrono::seconds(20));
  auto start = configFrom(shadowConfig("off"), *registry);
  std::vector<std::shared_ptr<ProcessGroup>> groups(2);
  runRanks(2, [&](int r) { groups[r] = ProcessGroup::create({start, registry, store, r, 2}); });
  const auto to = [&](const std::string& backend) {
    return configFrom(
        "group: { timeout: 20s }\n"
        "backends: { gloo: { options: { threads: 1, contexts: 1 } }, ref: { plugin: storecoll },"
        " off: { plugin: offbyone } }\n"
        "routes: [{ device: cpu, backend: gloo }, { device: cpu, op: allreduce, backend: " +
            backend + " }]\n",
        *registry);
  };
  ReconfigureOptions only;
  only.onlyIfShadowAgrees = true;
  runRanks(2, [&](int r) {
    checkedAllreduce(*groups[r], 0);
    groups[r]->barrier()->wait();
  });
  // Let the comparisons land before the decision (they complete on backend threads).
  for (int i = 0; i < 500 && (groups[0]->shadowReport().empty() || groups[1]->shadowReport().empty()); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  runRanks(2, [&](int r) {
    EXPECT_THROW_WITH(groups[r]->reconfigure(to("off"), only), ConfigError, "onlyIfShadowAgrees refused the swap",
                      "backend 'off' disagreed with 'gloo' as its shadow on allreduce",
                      "3 from the backend, 4 from the shadow");
    EXPECT_THROW_WITH(groups[r]->reconfigure(to("ref"), only), ConfigError,
                      "backend 'ref' would serve ops after the swap but never ran as a shadow in this group");
    checkedAllreduce(*groups[r], 1);  // still on gloo
    EXPECT_EQ(groups[r]->generation(), 0u);
  });
  // Shadow ref (agreeing), then the same swap passes.
  runRanks(2, [&](int r) { groups[r]->reconfigure(configFrom(shadowConfig("ref"), *registry)); });
  runRanks(2, [&](int r) { checkedAllreduce(*groups[r], 2); });
  for (int i = 0; i < 500; ++i) {
    bool both = true;
    for (auto& g : groups) {
      bool seen = false;
      for (const auto& rec : g->shadowReport()) seen = seen || (rec.shadow == "ref" && rec.agreed > 0);
      both = both && seen;
    }
    if (both) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  runRanks(2, [&](int r) {
    groups[r]->reconfigure(to("ref"), only);
    checkedAllreduce(*groups[r], 3);
    EXPECT_EQ(groups[r]->generation(), 2u);
  });
}

}  // namespace
}  // namespace commhost::test
