// SPDX-License-Identifier: Apache-2.0
#include "commhost/backend_sdk.h"

#include <unistd.h>

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

std::vector<std::string> exchangeAll(const BackendContext& ctx, const std::string& key, const std::string& mine,
                                     const char* what) {
  ctx.store->set(key + "/" + std::to_string(ctx.rank), toBytes(mine));
  std::vector<std::string> keys;
  keys.reserve(static_cast<size_t>(ctx.worldSize));
  for (int r = 0; r < ctx.worldSize; ++r) keys.push_back(key + "/" + std::to_string(r));
  try {
    ctx.store->wait(keys, ctx.timeout);
  } catch (const TimeoutError&) {
    std::string missing;
    for (int r = 0; r < ctx.worldSize; ++r)
      if (!ctx.store->check({keys[r]})) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    raise(ErrorCode::Timeout, ErrorContext::of(ctx, what),
          (missing.empty() ? std::string("not every rank") : "ranks " + missing) + " did not publish '" + key +
              "' within " + std::to_string(ctx.timeout.count()) + " ms",
          "check that every rank of the group started and creates the same backends");
  }
  std::vector<std::string> out;
  for (const Bytes& b : ctx.store->multiGet(keys)) out.emplace_back(b.begin(), b.end());
  return out;
}

}  // namespace commhost
