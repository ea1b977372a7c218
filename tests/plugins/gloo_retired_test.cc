// SPDX-License-Identifier: Apache-2.0
// gloo's Retired (plugins/gloo/retired.h): a finished op's buffers live on until kKept
// more have finished, then go oldest first; clear() lets go of all of them.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "../../plugins/gloo/retired.h"

namespace commhost::gloo_backend {
namespace {

TEST(GlooRetired, KeepsTheLastFewAndDestroysTheOldestFirst) {
  Retired retired;
  std::vector<std::weak_ptr<int>> seen;
  for (int i = 0; i < static_cast<int>(Retired::kKept) + 2; ++i) {
    auto op = std::make_shared<int>(i);
    seen.push_back(op);
    retired.keep(std::move(op));
  }
  EXPECT_TRUE(seen[0].expired());
  EXPECT_TRUE(seen[1].expired());
  for (size_t i = 2; i < seen.size(); ++i) EXPECT_FALSE(seen[i].expired()) << "op " << i;
  retired.clear();
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_TRUE(seen[i].expired()) << "op " << i;
}

// Ops finish on several workers at once; none may be lost track of or kept twice.
TEST(GlooRetired, KeepsFromSeveralThreadsAtOnce) {
  Retired retired;
  constexpr int kPerThread = 2000;
  std::vector<std::vector<std::weak_ptr<int>>> seen(2);
  std::vector<std::thread> workers;
  for (int w = 0; w < 2; ++w)
    workers.emplace_back([&, w] {
      for (int i = 0; i < kPerThread; ++i) {
        auto op = std::make_shared<int>(i);
        seen[w].push_back(op);
        retired.keep(std::move(op));
      }
    });
  for (auto& t : workers) t.join();
  size_t alive = 0;
  for (const auto& list : seen)
    for (const auto& op : list) alive += op.expired() ? 0 : 1;
  EXPECT_EQ(alive, Retired::kKept);
  retired.clear();
  for (const auto& list : seen)
    for (const auto& op : list) EXPECT_TRUE(op.expired());
}

}  // namespace
}  // namespace commhost::gloo_backend
