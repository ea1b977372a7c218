// SPDX-License-Identifier: Apache-2.0
#include "commhost/sdk/backend_sdk.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>

#include "commhost/errors.h"

namespace commhost {

std::string hostIdentity() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  std::string boot;
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::getline(in, boot);
  return std::string(host) + " boot " + (boot.empty() ? "unknown" : boot);
}

std::vector<int> allowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  return cpus;
}

namespace {
constexpr std::chrono::milliseconds kSlice{100};  // how soon a published failure is seen
}  // namespace

// One key per exchange, so a waiting rank looks for a failure with one call per slice.
void publishFailure(const BackendContext& ctx, const std::string& key, const std::string& why) {
  ctx.store->set(key + "/failed", toBytes("rank " + std::to_string(ctx.rank) + " " + why));
}

void publishForExchange(const BackendContext& ctx, const std::string& key, const std::string& mine) {
  ctx.store->set(key + "/" + std::to_string(ctx.rank), toBytes(mine));
}

std::vector<std::string> exchangeAll(const BackendContext& ctx, const std::string& key, const std::string& mine,
                                     const char* what) {
  publishForExchange(ctx, key, mine);
  std::vector<std::string> keys;
  keys.reserve(static_cast<size_t>(ctx.worldSize));
  for (int r = 0; r < ctx.worldSize; ++r) keys.push_back(key + "/" + std::to_string(r));
  const auto deadline = std::chrono::steady_clock::now() + ctx.timeout;
  // In slices: between them, a failure another rank published ends the wait.
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                            std::chrono::steady_clock::now());
    try {
      ctx.store->wait(keys, std::max(std::chrono::milliseconds(1), std::min(left, kSlice)));
      break;
    } catch (const TimeoutError&) {
      if (ctx.store->check({key + "/failed"}))
        raise(ErrorCode::Plugin, ErrorContext::of(ctx, what), toString(ctx.store->get(key + "/failed")),
              "fix what that error names; every rank of the group gives up");
      if (std::chrono::steady_clock::now() < deadline) continue;
      std::string missing;
      for (int r = 0; r < ctx.worldSize; ++r)
        if (!ctx.store->check({keys[static_cast<size_t>(r)]}))
          missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      raise(ErrorCode::Timeout, ErrorContext::of(ctx, what),
            (missing.empty() ? std::string("not every rank") : "ranks " + missing) + " did not publish '" + key +
                "' within " + std::to_string(ctx.timeout.count()) + " ms",
            "check that every rank of the group started and creates the same backends");
    }
  }
  std::vector<std::string> out;
  for (const Bytes& b : ctx.store->multiGet(keys)) out.emplace_back(b.begin(), b.end());
  return out;
}

}  // namespace commhost
