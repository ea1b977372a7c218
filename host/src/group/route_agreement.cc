// SPDX-License-Identifier: Apache-2.0
// With a tuner, the ranks of a group compare their route tables (commhost/sdk/tuner.h):
// a tuner that answered them differently (a file that differs between hosts, state of its
// own rank, ranks per host) would send one call to different backends on different ranks.
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "impl.h"

namespace commhost {
namespace {

// "" when every rank's table fingerprint (by group rank) is the same; else what differs,
// naming each set of ranks (their global ranks) and its fingerprint.
std::string routesDisagreement(const Config& config, const std::vector<std::string>& fingerprints,
                               const std::vector<int>& globalRanks) {
  std::map<std::string, std::vector<int>> byFingerprint;
  for (size_t r = 0; r < fingerprints.size(); ++r) byFingerprint[fingerprints[r]].push_back(globalRanks[r]);
  if (byFingerprint.size() <= 1) return "";
  std::string seen;
  for (const auto& [fingerprint, ranks] : byFingerprint) {
    std::string list;
    for (int r : ranks) list += (list.empty() ? "" : ",") + std::to_string(r);
    seen += (seen.empty() ? "" : "; ") + std::string("rank(s) ") + list + " built " + fingerprint;
  }
  const std::string tuner = config.tuner ? "tuner '" + config.tuner->plugin + "'" : std::string("the config");
  return tuner + " answered the ranks differently, so their route tables differ (fingerprints: " + seen +
         "): the ranks would send the same call to different backends";
}

constexpr const char* kRoutesAgreementHint =
    "a tuner must answer from what every rank shares: give every host the same tuner options and files, or remove "
    "`tuner:` from the config; `commhost config check FILE --world N` on each host shows the table it builds";

}  // namespace

// Each rank publishes "ok FINGERPRINT" or "error WHY" under its own key and reads every
// rank's, so all of them refuse together, before any backend starts its rendezvous, and
// a rank whose build failed is named with its reason instead of leaving the others to
// wait for its key until the store times out.
RouteTable ProcessGroup::Impl::agreedRoutes(Store& store) {
  std::optional<RouteTable> table;
  std::exception_ptr failure;
  std::string why;
  try {
    table = RouteTable::forGroup(*setup_.config, *setup_.registry, tableSite());
  } catch (const std::exception& e) {
    failure = std::current_exception();
    why = e.what();
  }
  store.set("routes_fingerprint/" + std::to_string(rank_),
            toBytes(table ? "ok " + std::to_string(table->fingerprint()) : "error " + why));
  if (failure) std::rethrow_exception(failure);
  std::vector<std::string> keys;
  for (int r = 0; r < worldSize_; ++r) keys.push_back("routes_fingerprint/" + std::to_string(r));
  store.wait(keys, store.timeout());
  const std::vector<Bytes> all = store.multiGet(keys);
  std::vector<std::string> fingerprints;
  for (int r = 0; r < worldSize_; ++r) {
    const std::string value = toString(all[r]);
    if (value.rfind("error ", 0) == 0)
      raise(ErrorCode::Config, {name_, rank_},
            "rank " + std::to_string(globalRanks_[r]) + " could not build its route table: " + value.substr(6),
            "fix what that rank names (its tuner's plugin, options or files), then start the group again");
    fingerprints.push_back(value.substr(3));
  }
  const std::string differ = routesDisagreement(*setup_.config, fingerprints, globalRanks_);
  if (!differ.empty()) raise(ErrorCode::Config, {name_, rank_}, differ, kRoutesAgreementHint);
  return *table;
}

}  // namespace commhost
