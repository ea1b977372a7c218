// SPDX-License-Identifier: Apache-2.0
#include "bookkeeping.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "commhost/errors.h"

namespace commhost::cli {

// One key per rank and round ("bench/<round>/<rank>"): a round costs each rank a set, a
// wait for every rank's key and a multiGet, and a missing rank is named by its key.
// Keys are never reused, so no round can see a value of an earlier one.
std::vector<std::string> StoreRounds::exchange(const std::string& mine, const std::string& what) {
  const std::string prefix = "bench/" + std::to_string(++round_) + "/";
  std::vector<std::string> keys;
  for (int r = 0; r < pg_.size(); ++r) keys.push_back(prefix + std::to_string(r));
  ErrorContext where;
  where.group = pg_.name();
  where.rank = pg_.rank();
  where.op = "bench bookkeeping";
  try {
    pg_.store()->set(keys[pg_.rank()], toBytes(mine));
    pg_.store()->wait(keys, pg_.config().timeout());
    std::vector<std::string> values;
    for (const auto& b : pg_.store()->multiGet(keys)) values.push_back(toString(b));
    return values;
  } catch (const TimeoutError&) {
    std::string missing;
    try {
      for (int r = 0; r < pg_.size(); ++r)
        if (!pg_.store()->check({keys[r]})) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    } catch (const Error&) {
    }
    where.key = prefix + "*";
    raise(ErrorCode::Timeout, where,
          "rank(s) " + (missing.empty() ? std::string("?") : missing) + " did not reach the bench's store round " +
              std::to_string(round_) + " (" + what + ") within " + formatDuration(pg_.config().timeout()),
          "check those ranks' output: they may have failed or hung in the op before");
  } catch (const Error& e) {
    where.key = prefix + std::to_string(pg_.rank());
    raise(e.code(), where, "the bench's store round " + std::to_string(round_) + " (" + what + ") failed: " + e.what(),
          "the rank serving it (usually 0) may have died; check its output");
  }
}

StoreRounds::Agreed StoreRounds::agree(const LoopStats& mine, int64_t wrong, const std::string& what) {
  // "<wrong> <stats>": the count first, so the stats can take the rest of the line.
  std::vector<LoopStats> perRank;
  Agreed agreed;
  for (const auto& v : exchange(std::to_string(wrong) + " " + encode(mine), what)) {
    const size_t space = v.find(' ');
    agreed.sumWrong += std::strtoll(v.c_str(), nullptr, 10);
    perRank.push_back(decode(space == std::string::npos ? "" : v.substr(space + 1)));
  }
  agreed.slowest = slowest(perRank);
  return agreed;
}

double StoreRounds::agreeMax(double value, const std::string& what) {
  char mine[32];
  std::snprintf(mine, sizeof mine, "%.17g", value);
  double most = 0;
  for (const auto& v : exchange(mine, what)) most = std::max(most, std::strtod(v.c_str(), nullptr));
  return most;
}

}  // namespace commhost::cli
