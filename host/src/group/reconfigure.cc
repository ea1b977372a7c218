// SPDX-License-Identifier: Apache-2.0
// ProcessGroup::reconfigure: hot swap of a group's backends and routes, with rollback.
// The protocol's phases are SwapAttempt's (swap_attempt.h); here the entry points and the
// shadow-agreement check a swap may require.
#include <algorithm>

#include "commhost/errors.h"
#include "group_state.h"
#include "shadow.h"
#include "swap_attempt.h"

namespace commhost {

// onlyIfShadowAgrees: every backend `next` sends ops to that the current table does not
// must have run as a shadow here, sampled at least once, with no disagreement or failure.
void ProcessGroup::Impl::requireShadowAgreement(const RouteTable& next, const ErrorContext& where) const {
  const auto records = shadows_->report(state_->config->timeout());  // the comparisons still in flight too
  const RouteTable& now = state_->routes;
  for (size_t i = 0; i < next.backendNames().size(); ++i) {
    const std::string& name = next.backendNames()[i];
    if (!next.serves(static_cast<int>(i))) continue;
    const auto& names = now.backendNames();
    const auto it = std::find(names.begin(), names.end(), name);
    if (it != names.end() && now.serves(static_cast<int>(it - names.begin()))) continue;
    uint64_t samples = 0;
    for (const auto& r : records) {
      if (r.shadow != name) continue;
      samples += r.agreed;
      if (r.disagreed)
        raise(ErrorCode::Config, where,
              "backend '" + name + "' disagreed with '" + r.backend + "' as its shadow on " + r.op + " of up to " +
                  std::to_string(r.bytes) + " bytes in " + std::to_string(r.disagreed) + " of " +
                  std::to_string(r.samples) + " samples (first: " + r.firstDisagreement + ")",
              "find why before swapping to it");
      if (r.failed)
        raise(ErrorCode::Config, where,
              "backend '" + name + "' failed as the shadow of '" + r.backend + "' on " + r.op + " in " +
                  std::to_string(r.failed) + " of " + std::to_string(r.samples) + " samples (first: " + r.firstFailure +
                  ")",
              "fix it before swapping to it");
    }
    if (samples == 0)
      raise(
          ErrorCode::Config, where,
          "backend '" + name + "' would serve ops after the swap but never ran as a shadow in this group",
          "add `shadow: " + name + "` (and `sample: RATE`) to the routes it would take over and run some steps first");
  }
}

ReconfigureReport ProcessGroup::Impl::reconfigure(std::shared_ptr<const Config> newConfig,
                                                  const ReconfigureOptions& options) {
  if (!newConfig)
    raise(ErrorCode::InvalidArgument, {name_, rank_, "reconfigure"}, "got no config",
          "pass a config loaded with this group's registry");
  return reconfigureOrRefuse(std::move(newConfig), options, "");
}

ReconfigureReport ProcessGroup::Impl::reconfigureOrRefuse(std::shared_ptr<const Config> newConfig,
                                                          const ReconfigureOptions& options,
                                                          const std::string& loadError) {
  return SwapAttempt(*this, std::move(newConfig), options, loadError).run();
}

}  // namespace commhost
